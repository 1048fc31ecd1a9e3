package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// CompleteClusterThenMember completes the first argument with the namespace's EtcdClusters
// and, when the command takes members (memberArgs > 0), the next with that cluster's members.
func (o *Options) CompleteClusterThenMember(memberArgs int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
		defer cancel()
		k, err := o.Kube()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []string
		switch {
		case len(args) == 0:
			list := &etcdv1.EtcdClusterList{}
			if err := k.Client.List(ctx, list, client.InNamespace(k.Namespace)); err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			for _, c := range list.Items {
				names = append(names, c.Name)
			}
		case len(args) <= memberArgs:
			members, err := k.Members(ctx, args[0])
			if err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			for _, m := range members {
				names = append(names, m.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

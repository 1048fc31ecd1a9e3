package node

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/quorumkeeper/etcd-operator/test/localcluster/runtime"
)

// containerSpec turns a Pod's container into what the runtime starts.
func (c *containerRun) containerSpec(ctx context.Context) (runtime.ContainerSpec, error) {
	r := c.pod
	img, imageID, err := r.p.image(ctx, c.spec.Image)
	if err != nil {
		return runtime.ContainerSpec{}, err
	}
	c.mu.Lock()
	c.imageID = imageID
	c.mu.Unlock()
	uid, gid, groups, err := identity(r.pod, c.spec, img.User)
	if err != nil {
		return runtime.ContainerSpec{}, err
	}
	if nonRootRequired(r.pod, c.spec) && uid == 0 {
		return runtime.ContainerSpec{}, fmt.Errorf("container %s has runAsNonRoot and would run as root: set runAsUser", c.spec.Name)
	}
	if err := os.MkdirAll(c.stateDir(), 0o755); err != nil {
		return runtime.ContainerSpec{}, err
	}
	env := c.environment(img)
	mounts, err := c.mounts()
	if err != nil {
		return runtime.ContainerSpec{}, err
	}
	c.mu.Lock()
	restarts := c.restarts
	c.mu.Unlock()
	return runtime.ContainerSpec{
		ID:                 fmt.Sprintf("%s-%s", r.pod.UID, c.spec.Name),
		StateDir:           filepath.Join(c.stateDir(), "runtime"),
		NetNS:              r.nsPath,
		Hostname:           r.hostname(),
		RootFiles:          img.Files,
		Args:               expandAll(img.command(c.spec.Command, c.spec.Args), env),
		Env:                env,
		WorkingDir:         cmp.Or(c.spec.WorkingDir, img.WorkingDir),
		Mounts:             mounts,
		HostsFile:          r.hostsFile(),
		ResolvConf:         r.resolvFile(),
		UID:                uid,
		GID:                gid,
		SupplementalGroups: groups,
		ReadOnlyRoot:       c.spec.SecurityContext != nil && ptrTrue(c.spec.SecurityContext.ReadOnlyRootFilesystem),
		LogPath:            c.logPath(restarts),
		Marker:             r.p.cfg.Marker,
	}, nil
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// identity is the user, group and supplementary groups the container runs as: the container's
// security context over the Pod's over the image's USER, root when none says (as an image
// without USER would).
func identity(pod *corev1.Pod, ctr *corev1.Container, imageUser string) (uid, gid int, groups []int, err error) {
	if runAsUser(pod, ctr) == nil {
		if uid, gid, err = parseImageUser(imageUser); err != nil {
			return 0, 0, nil, err
		}
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			uid = int(*psc.RunAsUser)
		}
		if psc.RunAsGroup != nil {
			gid = int(*psc.RunAsGroup)
		}
		for _, g := range psc.SupplementalGroups {
			groups = append(groups, int(g))
		}
		if psc.FSGroup != nil {
			groups = append(groups, int(*psc.FSGroup))
		}
	}
	if csc := ctr.SecurityContext; csc != nil {
		if csc.RunAsUser != nil {
			uid = int(*csc.RunAsUser)
		}
		if csc.RunAsGroup != nil {
			gid = int(*csc.RunAsGroup)
		}
	}
	return uid, gid, groups, nil
}

func runAsUser(pod *corev1.Pod, ctr *corev1.Container) *int64 {
	if csc := ctr.SecurityContext; csc != nil && csc.RunAsUser != nil {
		return csc.RunAsUser
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		return psc.RunAsUser
	}
	return nil
}

// parseImageUser reads an image's USER: "", "uid" or "uid:gid", numeric. A user name would
// need the image's /etc/passwd; the images run here have numeric users (the operator's is
// 65532:65532), so a name is refused rather than guessed.
func parseImageUser(user string) (uid, gid int, err error) {
	if user == "" {
		return 0, 0, nil
	}
	u, g, hasGroup := strings.Cut(user, ":")
	if uid, err = strconv.Atoi(u); err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("image user %q: the local cluster runs only numeric users", user)
	}
	if !hasGroup {
		return uid, 0, nil
	}
	if gid, err = strconv.Atoi(g); err != nil || gid < 0 {
		return 0, 0, fmt.Errorf("image user %q: the local cluster runs only numeric groups", user)
	}
	return uid, gid, nil
}

func nonRootRequired(pod *corev1.Pod, ctr *corev1.Container) bool {
	if csc := ctr.SecurityContext; csc != nil && csc.RunAsNonRoot != nil {
		return *csc.RunAsNonRoot
	}
	return pod.Spec.SecurityContext != nil && ptrTrue(pod.Spec.SecurityContext.RunAsNonRoot)
}

// environment is the image's env, then the container's (virtual-kubelet has already resolved
// valueFrom and envFrom, once, when the Pod reached this node), with the variables that name a
// field of the Pod worked out again from the Pod as it is now (fieldEnv), then what a kubelet
// adds. The apiserver is announced at the bridge address: a ClusterIP is never dialed in this
// local cluster.
func (c *containerRun) environment(img Image) []string {
	env := append([]string{}, img.Env...)
	for _, e := range c.spec.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	env = append(env, c.pod.resolveFields(c.fieldEnv)...)
	cfg := c.pod.p.cfg
	host, port := cfg.HostIP.String(), strconv.Itoa(cfg.APIPort)
	env = append(env,
		"HOSTNAME="+c.pod.hostname(),
		"KUBERNETES_SERVICE_HOST="+host,
		"KUBERNETES_SERVICE_PORT="+port,
		"KUBERNETES_SERVICE_PORT_HTTPS="+port,
		"KUBERNETES_PORT=tcp://"+host+":"+port,
		"KUBERNETES_PORT_443_TCP=tcp://"+host+":"+port,
		"KUBERNETES_PORT_443_TCP_ADDR="+host,
		"KUBERNETES_PORT_443_TCP_PORT="+port,
	)
	return lastWins(env)
}

// fieldEnv are the variables of the container, as its Pod declares them, whose value is a
// field of the Pod (valueFrom.fieldRef): a kubelet works them out from the Pod as it is at
// each start of the container, so that an annotation changed on a running Pod reaches the
// container's next start (not the running process, whose environment never changes).
func fieldEnv(declared *corev1.Pod, name string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, ctr := range append(append([]corev1.Container{}, declared.Spec.InitContainers...), declared.Spec.Containers...) {
		if ctr.Name != name {
			continue
		}
		for _, e := range ctr.Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				out = append(out, *e.DeepCopy())
			}
		}
	}
	return out
}

// resolveFields gives each variable the value of its field in the Pod as it is now: its
// metadata as UpdatePod last delivered it. A field this node cannot resolve (status.podIP)
// keeps the value virtual-kubelet gave it.
func (r *podRun) resolveFields(vars []corev1.EnvVar) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range vars {
		if value, err := podField(r.pod, e.ValueFrom.FieldRef.FieldPath); err == nil {
			out = append(out, e.Name+"="+value)
		}
	}
	return out
}

// lastWins keeps one entry per name, the last one, in first-seen order: a process reading its
// environment takes the first entry of a name, so duplicates would hide the overrides above
// (virtual-kubelet adds service variables with the ClusterIP, which is never dialed here).
func lastWins(env []string) []string {
	index := map[string]int{}
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if i, ok := index[name]; ok {
			out[i] = kv
			continue
		}
		index[name] = len(out)
		out = append(out, kv)
	}
	return out
}

func (c *containerRun) mounts() ([]runtime.Mount, error) {
	var mounts []runtime.Mount
	for _, vm := range c.spec.VolumeMounts {
		hostPath, ok := c.pod.vols.paths[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volume mount %q names no volume of the pod", vm.Name)
		}
		if vm.SubPath != "" {
			hostPath = filepath.Join(hostPath, vm.SubPath)
			if err := os.MkdirAll(hostPath, 0o777); err != nil {
				return nil, err
			}
		}
		mounts = append(mounts, runtime.Mount{HostPath: hostPath, ContainerPath: vm.MountPath, ReadOnly: vm.ReadOnly})
	}
	termPath := c.spec.TerminationMessagePath
	if termPath == "" {
		termPath = corev1.TerminationMessagePathDefault
	}
	if err := os.WriteFile(c.terminationLogPath(), nil, 0o666); err != nil {
		return nil, err
	}
	// Writable by any user, as the kubelet's termination-log file is.
	if err := os.Chmod(c.terminationLogPath(), 0o666); err != nil {
		return nil, err
	}
	return append(mounts, runtime.Mount{HostPath: c.terminationLogPath(), ContainerPath: termPath}), nil
}

var envReference = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandAll expands $(VAR) in command and args from the container's environment, as the
// kubelet does; unknown references stay as written.
func expandAll(args, env []string) []string {
	values := map[string]string{}
	for _, kv := range env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				values[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	out := make([]string, len(args))
	for i, arg := range args {
		out[i] = envReference.ReplaceAllStringFunc(arg, func(ref string) string {
			if v, ok := values[ref[2:len(ref)-1]]; ok {
				return v
			}
			return ref
		})
	}
	return out
}

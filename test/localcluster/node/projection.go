package node

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

const defaultFileMode = 0o644

// projectedFiles computes the files of a Secret, ConfigMap, downward-API or projected volume.
func (s volumeSources) projectedFiles(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, pv *podVolumes) (map[string]projectedFile, error) {
	files := map[string]projectedFile{}
	switch {
	case vol.Secret != nil:
		return files, s.addSecret(files, pod.Namespace, vol.Secret.SecretName, vol.Secret.Items, vol.Secret.Optional, modeOr(vol.Secret.DefaultMode))
	case vol.ConfigMap != nil:
		return files, s.addConfigMap(files, pod.Namespace, vol.ConfigMap.Name, vol.ConfigMap.Items, vol.ConfigMap.Optional, modeOr(vol.ConfigMap.DefaultMode))
	case vol.DownwardAPI != nil:
		return files, addDownwardAPI(files, pod, vol.DownwardAPI.Items, modeOr(vol.DownwardAPI.DefaultMode))
	case vol.Projected != nil:
		return files, s.addProjections(ctx, files, pod, vol, pv)
	}
	return files, nil
}

func (s volumeSources) addProjections(ctx context.Context, files map[string]projectedFile, pod *corev1.Pod, vol *corev1.Volume, pv *podVolumes) error {
	mode := modeOr(vol.Projected.DefaultMode)
	for i, src := range vol.Projected.Sources {
		var err error
		switch {
		case src.Secret != nil:
			err = s.addSecret(files, pod.Namespace, src.Secret.Name, src.Secret.Items, src.Secret.Optional, mode)
		case src.ConfigMap != nil:
			err = s.addConfigMap(files, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, mode)
		case src.DownwardAPI != nil:
			err = addDownwardAPI(files, pod, src.DownwardAPI.Items, mode)
		case src.ServiceAccountToken != nil:
			var token string
			token, err = s.token(ctx, pod, fmt.Sprintf("%s/%d", vol.Name, i), src.ServiceAccountToken, pv)
			files[src.ServiceAccountToken.Path] = projectedFile{Data: []byte(token), Mode: mode}
		default:
			err = fmt.Errorf("projection source %d is not supported by this local cluster", i)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func modeOr(mode *int32) os.FileMode {
	if mode == nil {
		return defaultFileMode
	}
	return os.FileMode(*mode)
}

func itemMode(item corev1.KeyToPath, fallback os.FileMode) os.FileMode {
	if item.Mode != nil {
		return os.FileMode(*item.Mode)
	}
	return fallback
}

func (s volumeSources) addSecret(files map[string]projectedFile, ns, name string, items []corev1.KeyToPath, optional *bool, mode os.FileMode) error {
	secret, err := s.secrets.Secrets(ns).Get(name)
	if err != nil {
		return missingSource(err, "secret", ns, name, optional)
	}
	return addKeys(files, secret.Data, items, mode, "secret "+ns+"/"+name)
}

func (s volumeSources) addConfigMap(files map[string]projectedFile, ns, name string, items []corev1.KeyToPath, optional *bool, mode os.FileMode) error {
	cm, err := s.configMaps.ConfigMaps(ns).Get(name)
	if err != nil {
		return missingSource(err, "configmap", ns, name, optional)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return addKeys(files, data, items, mode, "configmap "+ns+"/"+name)
}

// missingSource is nil for an optional source that does not exist, and an error the kubelet
// would also report otherwise (the Pod waits in ContainerCreating).
func missingSource(err error, kind, ns, name string, optional *bool) error {
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil
	}
	return fmt.Errorf("%s %s/%s: %w", kind, ns, name, err)
}

func addKeys(files map[string]projectedFile, data map[string][]byte, items []corev1.KeyToPath, mode os.FileMode, what string) error {
	if len(items) == 0 {
		for key, value := range data {
			files[key] = projectedFile{Data: value, Mode: mode}
		}
		return nil
	}
	for _, item := range items {
		value, ok := data[item.Key]
		if !ok {
			return fmt.Errorf("%s has no key %q", what, item.Key)
		}
		files[item.Path] = projectedFile{Data: value, Mode: itemMode(item, mode)}
	}
	return nil
}

func addDownwardAPI(files map[string]projectedFile, pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, mode os.FileMode) error {
	for _, item := range items {
		if item.FieldRef == nil {
			return fmt.Errorf("downward API file %s: only fieldRef is supported by this local cluster", item.Path)
		}
		value, err := podField(pod, item.FieldRef.FieldPath)
		if err != nil {
			return err
		}
		m := mode
		if item.Mode != nil {
			m = os.FileMode(*item.Mode)
		}
		files[item.Path] = projectedFile{Data: []byte(value), Mode: m}
	}
	return nil
}

// podField resolves the downward-API field paths of the Pod's metadata and spec that a volume
// or an environment variable can name, from the Pod as it is now.
func podField(pod *corev1.Pod, path string) (string, error) {
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	}
	return "", fmt.Errorf("downward API field %q is not supported by this local cluster", path)
}

// subscript is the key of a path "<field>['<key>']" into one of the Pod's maps.
func subscript(path, field string) (string, bool) {
	rest, ok := strings.CutPrefix(path, field+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

func formatMap(m map[string]string) string {
	lines := make([]string, 0, len(m))
	for k, v := range m {
		lines = append(lines, fmt.Sprintf("%s=%q", k, v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

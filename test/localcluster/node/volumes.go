package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// volumeSources gives the volume code what it reads: Secrets and ConfigMaps from the node's
// informer caches, claims and tokens from the API.
type volumeSources struct {
	client     kubernetes.Interface
	secrets    corev1listers.SecretLister
	configMaps corev1listers.ConfigMapLister
}

// podVolumes are the host directories behind one Pod's volumes.
type podVolumes struct {
	dir     string            // <pod dir>/volumes
	paths   map[string]string // volume name -> host path
	tmpfs   []string          // mounted by us, unmounted on teardown
	refresh []func(context.Context) error
	mu      sync.Mutex
	tokens  map[string]tokenCache // by volume/path
}

type tokenCache struct {
	token   string
	renewAt time.Time
}

// prepareVolumes makes every volume of the Pod exist on the host. Secrets, ConfigMaps and
// projections are written once here and then kept in sync by refreshAll.
func (s volumeSources) prepareVolumes(ctx context.Context, pod *corev1.Pod, podDir string) (*podVolumes, error) {
	pv := &podVolumes{dir: filepath.Join(podDir, "volumes"), paths: map[string]string{}, tokens: map[string]tokenCache{}}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		path, err := s.prepareVolume(ctx, pod, vol, pv)
		if err != nil {
			pv.teardown()
			return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
		}
		pv.paths[vol.Name] = path
	}
	if err := pv.refreshAll(ctx); err != nil {
		pv.teardown()
		return nil, err
	}
	return pv, nil
}

func (s volumeSources) prepareVolume(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, pv *podVolumes) (string, error) {
	path := filepath.Join(pv.dir, vol.Name)
	gid := fsGroup(pod)
	switch {
	case vol.EmptyDir != nil:
		return path, makeEmptyDir(path, vol.EmptyDir, gid, pv)
	case vol.PersistentVolumeClaim != nil:
		return s.claimPath(ctx, pod.Namespace, vol.PersistentVolumeClaim.ClaimName, gid)
	case vol.HostPath != nil:
		return vol.HostPath.Path, nil
	case vol.Secret != nil, vol.ConfigMap != nil, vol.Projected != nil, vol.DownwardAPI != nil:
		pv.refresh = append(pv.refresh, func(ctx context.Context) error {
			files, err := s.projectedFiles(ctx, pod, vol, pv)
			if err != nil {
				return err
			}
			_, err = writeAtomically(path, files, gid)
			return err
		})
		return path, os.MkdirAll(path, 0o755)
	default:
		return "", fmt.Errorf("this local cluster does not support the volume type")
	}
}

func fsGroup(pod *corev1.Pod) int {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		return int(*sc.FSGroup)
	}
	return 0
}

func makeEmptyDir(path string, src *corev1.EmptyDirVolumeSource, gid int, pv *podVolumes) error {
	if err := os.MkdirAll(path, 0o777); err != nil {
		return err
	}
	if src.Medium == corev1.StorageMediumMemory {
		opts := "mode=0777"
		if src.SizeLimit != nil && !src.SizeLimit.IsZero() {
			opts += ",size=" + strconv.FormatInt(src.SizeLimit.Value(), 10)
		}
		if err := unix.Mount("tmpfs", path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mounting tmpfs: %w", err)
		}
		pv.tmpfs = append(pv.tmpfs, path)
	}
	return shareWithGroup(path, gid)
}

// shareWithGroup gives a volume's root to the Pod's fsGroup, as the kubelet does, so a
// non-root container can write its data there.
func shareWithGroup(path string, gid int) error {
	if gid == 0 {
		return os.Chmod(path, 0o777)
	}
	if err := os.Chown(path, 0, gid); err != nil {
		return err
	}
	return os.Chmod(path, 0o2775)
}

// claimPath finds the directory of a bound claim. An unbound claim is an error the pod
// controller retries, and the Pod stays Pending meanwhile, as with a real kubelet.
func (s volumeSources) claimPath(ctx context.Context, ns, name string, gid int) (string, error) {
	claim, err := s.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if claim.Spec.VolumeName == "" || claim.Status.Phase != corev1.ClaimBound {
		return "", fmt.Errorf("claim %s/%s is not bound yet", ns, name)
	}
	vol, err := s.client.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	var path string
	switch {
	case vol.Spec.Local != nil:
		// A local volume is a disk of its node: a kubelet mounts it only if it is there, it
		// never makes one. Gone with its machine (removeNode), it stays gone, and the Pod
		// Pending, as on a real cluster.
		path = vol.Spec.Local.Path
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("local volume %s: %w", vol.Name, err)
		}
	case vol.Spec.HostPath != nil:
		path = vol.Spec.HostPath.Path
		if err := os.MkdirAll(path, 0o777); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("volume %s is neither local nor hostPath", vol.Name)
	}
	return path, shareWithGroup(path, gid)
}

func (pv *podVolumes) refreshAll(ctx context.Context) error {
	for _, refresh := range pv.refresh {
		if err := refresh(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (pv *podVolumes) teardown() {
	for _, path := range pv.tmpfs {
		_ = unix.Unmount(path, unix.MNT_DETACH)
	}
	pv.tmpfs = nil
}

// token returns a cached projected token, renewed after 80% of its life as the kubelet does.
func (s volumeSources) token(ctx context.Context, pod *corev1.Pod, key string, src *corev1.ServiceAccountTokenProjection, pv *podVolumes) (string, error) {
	pv.mu.Lock()
	defer pv.mu.Unlock()
	if cached, ok := pv.tokens[key]; ok && time.Now().Before(cached.renewAt) {
		return cached.token, nil
	}
	ttl := int64(3600)
	if src.ExpirationSeconds != nil {
		ttl = *src.ExpirationSeconds
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &ttl,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	resp, err := s.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	life := time.Until(resp.Status.ExpirationTimestamp.Time)
	pv.tokens[key] = tokenCache{token: resp.Status.Token, renewAt: time.Now().Add(life * 8 / 10)}
	return resp.Status.Token, nil
}

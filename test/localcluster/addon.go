package localcluster

import "fmt"

// StartAddon starts another marked process beside the control plane (cert-manager's
// controller, an S3 server), logged to Dir/logs/<name>.log and stopped with it.
func (cp *ControlPlane) StartAddon(name, bin string, args []string) error {
	c, err := cp.startChild(name, bin, args)
	if err != nil {
		return err
	}
	if c.hasExited() {
		return fmt.Errorf("localcluster: %s exited at once; see %s", name, c.logPath)
	}
	return nil
}

"""What kubelet and kube-controller-manager/kube-scheduler do for CSI volumes, played by the runner
for its node (the CSI sidecars' part is nodeenv/kubelet/sidecars/):

- pluginwatcher.py: kubelet's plugin watcher: drivers registered through `plugins_registry`, the
  node's CSINode (node id, topology keys, allocatable) and the Node's topology labels;
- pvcontroller.py: the PV controller: claims handed to their class's provisioner, bound to the
  PV provisioned for them, PVs Released when their claim is gone; its Events;
- volumebinding.py: the scheduler's VolumeBinding for Pods that use claims (WaitForFirstConsumer's
  `selected-node`, the Pod bound once its claims are);
- csivolumes.py: the attach-detach controller's VolumeAttachments and kubelet's CSI volume plugin
  (NodeStage/Publish at kubelet's paths, the mount in the container, NodeExpandVolume, teardown);
- snapshotcontroller.py: the snapshot-controller (VolumeSnapshot -> VolumeSnapshotContent).
"""

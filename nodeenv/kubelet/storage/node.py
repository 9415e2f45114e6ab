"""The storage parts the runner plays, in one place: per node, the plugin watcher and the CSI
volumes of its Pods; cluster-wide (once per cluster), the PV controller, the scheduler's volume
binding and the snapshot-controller. Each sync's failure is logged and retried at the next."""

from __future__ import annotations

import logging
from pathlib import Path

from nodeenv.kubelet.apiclient import ApiError, KubeClient
from nodeenv.kubelet.storage.csivolumes import CsiVolumes
from nodeenv.kubelet.storage.pluginwatcher import PluginWatcher
from nodeenv.kubelet.storage.pvcontroller import PVController
from nodeenv.kubelet.storage.snapshotcontroller import SnapshotController
from nodeenv.kubelet.storage.volumebinding import VolumeBinding
from nodeenv.kubelet.volumes import NodeRoot

log = logging.getLogger(__name__)


class NodeStorage:
    def __init__(
        self, client: KubeClient, node: str, root: NodeRoot, kubelet_dir: Path, cluster: bool = True
    ) -> None:
        """cluster: also play the cluster-wide parts (one runner of a cluster should)."""
        self.plugins = PluginWatcher(client, node, root, kubelet_dir)
        self.volumes = CsiVolumes(client, node, root, self.plugins)
        self.cluster = (
            (PVController(client), VolumeBinding(client), SnapshotController(client)) if cluster else ()
        )

    def sync(self) -> None:
        for part in (self.plugins, self.volumes, *self.cluster):
            try:
                part.sync()
            except (ApiError, OSError) as e:
                log.warning("%s: sync failed: %s", type(part).__name__, e)

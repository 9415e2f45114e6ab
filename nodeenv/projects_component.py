"""project-controller in the node environment, against the API double (KUBECONFIG).

node.env gains PROJECTS_METRICS (the /metrics URL).
"""

from __future__ import annotations

from nodeenv.netpol_component import start_controller
from nodeenv.node import Node


class ProjectsComponent:
    name = "project-controller"

    def start(self, node: Node) -> dict[str, str]:
        base = start_controller(node, self.name, "controllers.projects.main", [])
        return {"PROJECTS_METRICS": f"{base}/metrics"}

    def cleanup(self, node: Node) -> None:
        """The daemon is stopped by PID; what it created lives in the API double."""

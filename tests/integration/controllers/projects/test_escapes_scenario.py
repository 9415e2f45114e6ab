"""The sandbox's escapes scenario (nodeenv/scenarios/escapes.py) on the node environment's own
components, as node-up starts them: the IAM webhook first, then the API double authenticating
tokens through it (`KubeApiComponent(token_webhook=True)`: its config file, RBAC enforced), then
project-controller writing each project's RBAC. Every step must pass: each escape refused."""

from __future__ import annotations

import time
from pathlib import Path

from nodeenv.kubeapi_component import KubeApiComponent
from nodeenv.node import Node, NodeSettings
from nodeenv.projects_component import ProjectsComponent
from nodeenv.scenario import Scenario
from nodeenv.scenarios import escapes
from nodeenv.webhook_component import WebhookComponent


def test_every_escape_is_refused_in_the_node_environment(short_tmp: Path) -> None:
    settings = NodeSettings(run_dir=short_tmp / f"esc-{time.monotonic_ns()}", bridge="br-unused")
    node = Node(settings, [WebhookComponent(), KubeApiComponent(token_webhook=True), ProjectsComponent()])
    node.up()
    try:
        scn = Scenario(node)
        try:
            escapes.run(scn)
        finally:
            errors = scn.run_cleanups()
        print(scn.table())
        assert all(r.ok for r in scn.results) and errors == [], (scn.table(), errors)
        assert len(scn.results) == 2 + len(escapes.ESCAPES) + 4
    finally:
        node.down()

"""prismnet-agent's /metrics and /healthz answer promptly while a CNI ADD's NB write hangs: the
NB's ovsdb-server stopped (SIGSTOP), the write waits for its commit on the connection thread, and
every replica read queues behind it. kubelet kills a daemon whose health endpoint does not answer."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from urllib.parse import urlsplit

from nodeenv.cni_component import CniCall
from tests.integration.cni.conftest import Agent, Pods

PROMPT = 1.0
"""Seconds: the scrape waits 0.25 s for the node figures (cni/daemon/metrics.py), the rest is slack
for a loaded machine; before the fix it took as long as the write's retries."""


@contextlib.contextmanager
def _nb_stopped(agent: Agent) -> Iterator[None]:
    (nb,) = [r for r in agent.node.daemons.load() if r.name.startswith("ovsdb-server-nb")]
    os.kill(nb.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(nb.pid, signal.SIGCONT)


def _timed_get(url: str) -> tuple[float, int, str]:
    t0 = time.monotonic()
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = resp.read().decode()
        return time.monotonic() - t0, resp.status, body


def test_metrics_and_healthz_answer_while_an_add_waits_on_the_nb(agent: Agent, pods: Pods) -> None:
    pods.add("stuck", "primed")  # the figures read once with the NB there
    metrics = agent.env["PRISMNET_METRICS"]
    healthz = urlsplit(metrics)._replace(path="/healthz").geturl()
    assert "prismnet_ipam_addresses{" in _timed_get(metrics)[2]
    name, path = pods.netns()
    cid = f"s{os.getpid()}x" + "0" * 24
    args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE=stuck;K8S_POD_NAME={name}"
    calls: list[CniCall] = []
    add = threading.Thread(target=lambda: calls.append(agent.runtime().add(cid, path, args=args)))
    try:
        with _nb_stopped(agent):
            add.start()
            time.sleep(1.5)  # the ADD's write on the connection thread, waiting for its commit
            assert add.is_alive(), "the ADD ended with the NB stopped"
            for url in (metrics, healthz, metrics):
                seconds, status, _ = _timed_get(url)
                print(f"NB stopped, an ADD waiting on it: {url} answered {status} in {seconds * 1000:.0f} ms")
                assert status == 200 and seconds < PROMPT, f"{url} took {seconds:.2f} s"
    finally:
        add.join(120)
        pods.created[-1] = (name, cid, args, calls[0].out if calls and calls[0].rc == 0 else {})
    assert not add.is_alive()

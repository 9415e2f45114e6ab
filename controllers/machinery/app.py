"""ControllerApp: the main program every controller's `main()` runs.

    app = ControllerApp("fiberlb-controller", setup, description=..., env_prefix="FIBERLB_",
                        add_arguments=add_fiberlb_flags)
    def main(argv: list[str] | None = None) -> int:
        return app.main(argv)

`setup(ctx)` registers informers (`ctx.informer(SERVICES)`) and controllers
(`ctx.controller("fiberlb", reconcile)`), wires handlers to `controller.enqueue_object`, and may
add background tasks (run on every replica) and cleanups. Then the app starts the informers on
every replica (warm caches, ready to take over) and runs the controllers only while leading
(always, with --leader-elect=false), once every informer has synced. On SIGTERM it stops the
workers (in-flight reconciles finish), flushes Events, releases the Lease and exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from kubernetes_asyncio.client import ApiClient

from common.jsonlog import setup_logging
from common.malloc import pin_mmap_threshold
from controllers.machinery.controller import Controller, Lookup, Reconcile
from controllers.machinery.events import EventRecorder
from controllers.machinery.health import make_health_app, serve
from controllers.machinery.informer import Informer
from controllers.machinery.kinds import Kind
from controllers.machinery.kubeconfig import KubeconfigError, load_api_client
from controllers.machinery.leader import LeaderElector
from controllers.machinery.metrics import MachineryMetrics
from controllers.machinery.rest import KubeClient
from controllers.machinery.settings import AddArguments, ControllerSettings, parse

log = logging.getLogger(__name__)

Cleanup = Callable[[], Awaitable[None]]
TaskFactory = Callable[[], Coroutine[Any, Any, None]]
SHUTDOWN_GRACE = 20.0  # seconds in-flight reconciles get on SIGTERM (the pod's grace period is 30)


class AppContext:
    """What `setup` gets: the API client, settings, metrics, Events, and registration methods."""

    def __init__(self, settings: ControllerSettings, api: ApiClient, reporting_controller: str) -> None:
        self.settings = settings
        self.args = settings.args
        self.api = api
        self.client = KubeClient(api)
        self.metrics = MachineryMetrics()
        self.events = EventRecorder(self.client, controller=reporting_controller, instance=settings.instance,
                                    metrics=self.metrics)  # fmt: skip
        self.informers: list[Informer] = []
        self.controllers: list[Controller] = []
        self.background: list[TaskFactory] = []
        self.leader_tasks: list[TaskFactory] = []
        self.cleanups: list[Cleanup] = []

    def informer(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resync_period: float | None = None,
    ) -> Informer:
        """A new informer, started with the app on every replica."""
        informer = Informer(self.client, kind, namespace=namespace, label_selector=label_selector,
                            field_selector=field_selector, resync_period=resync_period,
                            metrics=self.metrics)  # fmt: skip
        self.informers.append(informer)
        return informer

    def controller(
        self, name: str, reconcile: Reconcile, *, workers: int | None = None, lookup: Lookup | None = None
    ) -> Controller:
        """A new controller (workers default to --workers), run only while leading."""
        ctrl = Controller(name, reconcile, workers=workers or self.settings.workers, metrics=self.metrics,
                          events=self.events, lookup=lookup)  # fmt: skip
        self.controllers.append(ctrl)
        return ctrl

    def run_in_background(self, factory: TaskFactory) -> None:
        """A task run on every replica for the app's life (e.g. a DNS server answering from caches)."""
        self.background.append(factory)

    def run_while_leading(self, factory: TaskFactory) -> None:
        """A task started with the controllers when this replica leads (after the informers synced)
        and cancelled the moment it stops leading: periodic writes that are not reconciles."""
        self.leader_tasks.append(factory)

    def on_cleanup(self, cleanup: Cleanup) -> None:
        """Awaited at exit, after the controllers stopped and the Lease was released (LIFO)."""
        self.cleanups.append(cleanup)

    async def wait_synced(self) -> None:
        await asyncio.gather(*(i.wait_synced() for i in self.informers))


Setup = Callable[[AppContext], Awaitable[None]]


class ControllerApp:
    def __init__(
        self,
        program: str,
        setup: Setup,
        *,
        description: str = "",
        env_prefix: str = "",
        add_arguments: AddArguments | None = None,
        reporting_controller: str | None = None,
    ) -> None:
        """`reporting_controller` names us in Events (default "plasmacloud.io/<program>")."""
        self.program, self.setup, self.description = program, setup, description
        self.env_prefix, self.add_arguments = env_prefix, add_arguments
        self.reporting_controller = reporting_controller or f"plasmacloud.io/{program}"
        self.context: AppContext | None = None
        self.elector: LeaderElector | None = None
        self.metrics_port: int | None = None
        self._leading: asyncio.Task[None] | None = None
        self._election: asyncio.Task[None] | None = None
        self._stopping = False

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Console entry point: parse flags, JSON logs, run until SIGTERM/SIGINT."""
        settings = parse(self.program, self.description, sys.argv[1:] if argv is None else argv, os.environ,
                         prefix=self.env_prefix, add_arguments=self.add_arguments)  # fmt: skip
        setup_logging(settings.log_level)
        pin_mmap_threshold()
        return asyncio.run(self._main(settings))

    async def _main(self, settings: ControllerSettings) -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        return await self.run(settings, stop)

    async def run(self, settings: ControllerSettings, stop: asyncio.Event) -> int:
        """Run until `stop` is set; 0 after a clean shutdown, 1 when it cannot start."""
        try:
            api = await load_api_client(
                settings.kubeconfig, in_cluster=settings.in_cluster, program=self.program
            )
        except KubeconfigError as e:
            log.error("%s", e)
            return 1
        async with api, contextlib.AsyncExitStack() as stack:
            ctx = self.context = AppContext(settings, api, self.reporting_controller)
            try:
                await self.setup(ctx)
            except Exception:
                log.exception("%s: setup failed", self.program)
                return 1
            for cleanup in ctx.cleanups:
                stack.push_async_callback(cleanup)
            if settings.metrics_port is not None:
                health = make_health_app(ctx.metrics.registry, self._healthz, self._readyz)
                runner, self.metrics_port = await serve(health, settings.metrics_host, settings.metrics_port)
                log.info("/metrics, /healthz, /readyz on port %d", self.metrics_port,
                         extra={"metrics_port": self.metrics_port})  # fmt: skip
                stack.push_async_callback(runner.cleanup)
            tasks = [i.start() for i in ctx.informers]
            tasks += [asyncio.create_task(f()) for f in ctx.background]
            log.info("%s started: %d informers, %d controllers, leader election %s", self.program,
                     len(ctx.informers), len(ctx.controllers), settings.leader_elect)  # fmt: skip
            elect = self._election = self._start_election(ctx) if settings.leader_elect else None
            if elect is None:
                await self._start_leading()
            try:
                await stop.wait()
            finally:
                await self._shutdown(ctx, tasks, elect)
        return 0

    def _start_election(self, ctx: AppContext) -> asyncio.Task[None]:
        self.elector = LeaderElector(ctx.client, ctx.settings.lease, on_started_leading=self._start_leading,
                                     on_stopped_leading=self._stop_leading, metrics=ctx.metrics)  # fmt: skip
        return asyncio.create_task(self.elector.run(), name="leader-election")

    async def _start_leading(self) -> None:
        self._leading = asyncio.create_task(self._lead(), name="leading")

    async def _lead(self) -> None:
        assert self.context is not None
        await self.context.wait_synced()
        for ctrl in self.context.controllers:
            ctrl.start()
        results = await asyncio.gather(*(f() for f in self.context.leader_tasks), return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                log.error("%s: a leader task failed", self.program, exc_info=result)

    async def _stop_leading(self) -> None:
        """Lost the Lease (or releasing it): no reconcile may go on, cancel them now."""
        if self._leading is not None:
            self._leading.cancel()
        assert self.context is not None
        await asyncio.gather(*(c.stop(graceful=False) for c in self.context.controllers))

    async def _shutdown(
        self, ctx: AppContext, tasks: list[asyncio.Task[None]], elect: asyncio.Task[None] | None
    ) -> None:
        self._stopping = True
        log.info("%s stopping: finishing in-flight reconciles", self.program)
        if self._leading is not None:
            self._leading.cancel()
        graceful = asyncio.gather(*(c.stop(graceful=True) for c in ctx.controllers))
        try:
            await asyncio.wait_for(graceful, SHUTDOWN_GRACE)
        except TimeoutError:
            log.warning("in-flight reconciles did not finish in %.0fs; cancelled", SHUTDOWN_GRACE)
        for ctrl in ctx.controllers:
            ctrl.shutdown()
        if self.elector is not None:
            await self.elector.release()
        if elect is not None:
            await asyncio.gather(elect, return_exceptions=True)
        await ctx.events.flush()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        log.info("%s stopped", self.program)

    def _healthz(self) -> str | None:
        ctx = self.context
        if ctx is None:
            return "starting"
        dead = [i.kind.plural for i in ctx.informers if i.crashed]
        if self._election is not None and self._election.done() and not self._stopping:
            dead.append("leader election")
        return f"stopped: {', '.join(dead)}" if dead else None

    def _readyz(self) -> str | None:
        ctx = self.context
        if ctx is None or self._stopping:
            return "starting" if ctx is None else "stopping"
        waiting = [i.kind.plural for i in ctx.informers if not i.has_synced]
        return f"informers not synced: {', '.join(waiting)}" if waiting else None

    @property
    def is_leader(self) -> bool:
        if self.context is None:
            return False
        return self.elector.is_leader if self.elector is not None else bool(self.context.controllers)

"""The sandbox scenario runner: named, timed steps and the table they print."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from nodeenv.node import Node


@dataclass
class StepResult:
    name: str
    ok: bool
    seconds: float
    detail: str = ""


@dataclass
class Scenario:
    node: Node
    results: list[StepResult] = field(default_factory=list)
    _cleanups: list[Callable[[], object]] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return self.node.endpoints

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        except Exception as e:
            self.results.append(StepResult(name, False, time.perf_counter() - t0, f"{type(e).__name__}: {e}"))
            raise
        self.results.append(StepResult(name, True, time.perf_counter() - t0))

    def defer(self, fn: Callable[[], object]) -> None:
        """Register a cleanup (its result is ignored); they run newest first when the scenario ends."""
        self._cleanups.append(fn)

    def run_cleanups(self) -> list[str]:
        errors = []
        while self._cleanups:
            fn = self._cleanups.pop()
            try:
                fn()
            except Exception as e:
                errors.append(f"{getattr(fn, '__name__', fn)}: {e}")
        return errors

    def table(self) -> str:
        width = max([len(r.name) for r in self.results] + [4])
        lines = [f"{'step':<{width}}  result  time", f"{'-' * width}  ------  -------"]
        for r in self.results:
            res = "ok" if r.ok else "FAILED"
            lines.append(f"{r.name:<{width}}  {res:<6}  {r.seconds * 1000:7.1f} ms")
            if r.detail:
                lines.append(f"{'':<{width}}    {r.detail}")
        return "\n".join(lines)

"""Prometheus metrics: request counts and latencies, tokens per model, KV pages per model.

Written out by hand in the Prometheus text exposition format (version 0.0.4), so the server
needs no client library. Counters and the latency histogram are kept here; the KV page gauges
are read from the loaded models when `/metrics` is scraped.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import falcon

if TYPE_CHECKING:
    from llamay.server.state import ServerState

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds: from a health check to a long generation.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
# A request that matched no route is counted under this label, so that probing random paths
# cannot make one series per path.
UNMATCHED = "unmatched"


class Metrics:
    """Thread-safe counters and histograms for one server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, int], int] = defaultdict(int)
        # Per (method, route): a count per bucket (the last one is +Inf), the sum, the count.
        self._latency: dict[tuple[str, str], list[int]] = {}
        self._latency_sum: dict[tuple[str, str], float] = defaultdict(float)
        self._prompt_tokens: dict[str, int] = defaultdict(int)
        self._generated_tokens: dict[str, int] = defaultdict(int)
        # The state directory (contexts.py): restores, their seconds, lease conflicts, writes.
        self._fleet: dict[str, float] = defaultdict(float)

    def request(self, route: str, status: int, seconds: float, method: str = "GET") -> None:
        """One finished request: `route` is the URI template it matched (not the raw path)."""
        bucket = bisect.bisect_left(LATENCY_BUCKETS, seconds)
        with self._lock:
            self._requests[(method, route, status)] += 1
            counts = self._latency.setdefault((method, route), [0] * (len(LATENCY_BUCKETS) + 1))
            counts[bucket] += 1
            self._latency_sum[(method, route)] += seconds

    def tokens(self, model: str, prompt: int, generated: int) -> None:
        """Tokens one request evaluated from its prompt and generated, for `model`."""
        with self._lock:
            self._prompt_tokens[model] += prompt
            self._generated_tokens[model] += generated

    def restored(self, seconds: float) -> None:
        """A context restored from the state directory, in `seconds`."""
        with self._lock:
            self._fleet["contexts_restored"] += 1
            self._fleet["restore_seconds"] += seconds

    def lease_conflict(self) -> None:
        """A request refused because another replica holds its context's lease."""
        with self._lock:
            self._fleet["lease_conflicts"] += 1

    def handed_over(self) -> None:
        """A context let go because another replica asked for it."""
        with self._lock:
            self._fleet["handed_over"] += 1

    def snapshot_written(self, seconds: float, n_tokens: int) -> None:
        """A context written to the state directory: `n_tokens` long, in `seconds`."""
        with self._lock:
            self._fleet["snapshots_written"] += 1
            self._fleet["snapshot_seconds"] += seconds
            self._fleet["snapshot_tokens"] += n_tokens

    def fleet(self) -> dict[str, float]:
        """The state directory's counters (names as in /llamay/v1/stats' "replica")."""
        names = (
            "contexts_restored",
            "restore_seconds",
            "lease_conflicts",
            "handed_over",
            "snapshots_written",
            "snapshot_seconds",
            "snapshot_tokens",
        )
        with self._lock:
            return {name: self._fleet.get(name, 0) for name in names}

    def render(
        self,
        kv_stats: Mapping[str, Mapping[str, Any]],
        replica: Mapping[str, Any] | None = None,
    ) -> str:
        """The exposition text, with KV page gauges from `kv_stats` (model name -> kv_stats())
        and the replica's contexts from `replica` (the registry's stats())."""
        fleet = self.fleet()
        with self._lock:
            requests = dict(self._requests)
            latency = {key: list(counts) for key, counts in self._latency.items()}
            latency_sum = dict(self._latency_sum)
            prompt = dict(self._prompt_tokens)
            generated = dict(self._generated_tokens)
        lines: list[str] = []
        lines += _family(
            "llamay_requests_total",
            "counter",
            "HTTP requests answered, by method, route template and status.",
            (
                ({"method": m, "route": r, "status": str(s)}, n)
                for (m, r, s), n in sorted(requests.items())
            ),
        )
        lines += _histogram(latency, latency_sum)
        lines += _family(
            "llamay_prompt_tokens_total",
            "counter",
            "Prompt tokens evaluated, by model.",
            (({"model": m}, n) for m, n in sorted(prompt.items())),
        )
        lines += _family(
            "llamay_generated_tokens_total",
            "counter",
            "Tokens generated, by model.",
            (({"model": m}, n) for m, n in sorted(generated.items())),
        )
        lines += _family(
            "llamay_kv_pages",
            "gauge",
            "KV cache pages of each loaded model: used (held by contexts or the prefix cache), "
            "free, and cached (held by the prefix cache).",
            _page_samples(kv_stats),
        )
        lines += _fleet_lines(fleet, replica or {})
        return "\n".join(lines) + "\n"


class MetricsMiddleware:
    """Counts every response and times it; a streamed body is timed until its last byte (or
    until the client goes away)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.metrics_started = time.perf_counter()

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        started = getattr(req.context, "metrics_started", None)
        if started is None:  # the request failed before process_request ran
            started = time.perf_counter()
        route = req.uri_template or UNMATCHED
        status = resp.status_code

        def record() -> None:
            self.metrics.request(route, status, time.perf_counter() - started, req.method)

        if resp.stream is not None and not hasattr(resp.stream, "read"):
            resp.stream = after_stream(resp.stream, record)
        else:
            record()


def add_routes(app: falcon.App, state: ServerState) -> None:
    """`GET /metrics`."""
    from llamay.server import openapi

    app.add_route("/metrics", _MetricsResource(state))
    openapi.describe(
        "GET",
        "/metrics",
        "Prometheus metrics",
        tag="metrics",
        response={"type": "string"},
        response_type="text/plain",
    )


class _MetricsResource:
    def __init__(self, state: ServerState) -> None:
        self.state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = CONTENT_TYPE
        replica = self.state.contexts.stats()
        resp.text = self.state.metrics.render(loaded_kv_stats(self.state), replica)


def loaded_kv_stats(state: ServerState) -> dict[str, dict[str, Any]]:
    """kv_stats() of each loaded model, by the name it was loaded under."""
    return {name: model.kv_stats() for name, model in state.models.loaded_models().items()}


def after_stream(stream: Iterable[bytes], record: Any) -> Iterator[bytes]:
    """`stream`, then `record()` once it is done (or closed early: the client went away)."""
    try:
        yield from stream
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        record()


def _page_samples(
    kv_stats: Mapping[str, Mapping[str, Any]],
) -> Iterator[tuple[dict[str, str], int]]:
    for model, stats in sorted(kv_stats.items()):
        yield {"model": model, "state": "used"}, stats["pages_used"]
        yield {"model": model, "state": "free"}, stats["pages_free"]
        yield {"model": model, "state": "cached"}, stats.get("pages_cached", 0)


def _fleet_lines(fleet: Mapping[str, float], replica: Mapping[str, Any]) -> list[str]:
    """The replica's contexts and what the state directory cost it."""
    series = (
        (
            "llamay_contexts_resident",
            "gauge",
            "Contexts in this replica's memory.",
            replica.get("resident_contexts", 0),
        ),
        (
            "llamay_contexts_unwritten",
            "gauge",
            "Contexts with changes not yet written to the state directory.",
            replica.get("unwritten_contexts", 0),
        ),
        (
            "llamay_contexts_restored_total",
            "counter",
            "Contexts restored from the state directory.",
            fleet["contexts_restored"],
        ),
        (
            "llamay_context_restore_seconds_total",
            "counter",
            "Seconds spent restoring contexts from the state directory (divide by "
            "llamay_contexts_restored_total for the mean restore latency).",
            fleet["restore_seconds"],
        ),
        (
            "llamay_lease_conflicts_total",
            "counter",
            "Requests refused (409) because another replica held the context's lease.",
            fleet["lease_conflicts"],
        ),
        (
            "llamay_contexts_handed_over_total",
            "counter",
            "Contexts let go because another replica asked for them.",
            fleet["handed_over"],
        ),
        (
            "llamay_snapshots_written_total",
            "counter",
            "Context snapshots written to the state directory.",
            fleet["snapshots_written"],
        ),
        (
            "llamay_snapshot_write_seconds_total",
            "counter",
            "Seconds spent writing context snapshots.",
            fleet["snapshot_seconds"],
        ),
    )
    lines: list[str] = []
    for name, kind, help_text, value in series:
        lines += _family(name, kind, help_text, [({}, value)])
    return lines


def _histogram(
    latency: dict[tuple[str, str], list[int]], latency_sum: dict[tuple[str, str], float]
) -> list[str]:
    name = "llamay_request_seconds"
    lines = [
        f"# HELP {name} Seconds from request to the last byte of the response.",
        f"# TYPE {name} histogram",
    ]
    bounds = [_number(b) for b in LATENCY_BUCKETS] + ["+Inf"]
    for (method, route), counts in sorted(latency.items()):
        labels = {"method": method, "route": route}
        cumulative = 0
        for bound, count in zip(bounds, counts, strict=True):
            cumulative += count
            lines.append(f"{name}_bucket{_labels(labels | {'le': bound})} {cumulative}")
        lines.append(f"{name}_sum{_labels(labels)} {_number(latency_sum[(method, route)])}")
        lines.append(f"{name}_count{_labels(labels)} {cumulative}")
    return lines


def _family(
    name: str, kind: str, help_text: str, samples: Iterable[tuple[dict[str, str], float]]
) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{_labels(labels)} {_number(value)}" for labels, value in samples]
    return lines


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items()) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))

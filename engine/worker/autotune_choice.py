"""Every `@triton.autotune` configuration checked for correctness, none of them timed (worker only).

Why: a tuned kernel picks its configuration by timing each one, per key, on whatever GPU it runs
on; the one the harness machine would pick says nothing of the others, and any of them may be
picked on the user's GPU. Timing them was also what made tuned candidates expensive to verify:
each new shape of the harness re-tuned every configuration (Triton's default ~125 ms of timing
each). On an H200 the sweep stage of one six-config autotuned
matmul candidate took 16-19 s, that of a fixed-config candidate ~0.1 s; checking every
configuration untimed, the sweeps of all twelve candidates of a ladder-vs-full run took 1.7 s.

While an `AutotuneChoice` is entered, each call of a tuned kernel forgets its tuning and picks
configuration `want` (counted among those its pruning keeps, cycling) instead of the fastest. The
rest of the tuner runs as Triton wrote it: its pruning, its pre- and post-hooks, `reset_to_zero`
and `restore_value`; the chosen configuration runs once in the tuning as it would be timed, and if
it fails to compile there (out of shared memory, a compile-time assertion) the tuner skips it, as
it would, and runs the first other configuration kept. On leaving, each tuner gets back its own
picks, so that a timing never runs on a configuration the harness chose: it tunes for real or
keeps what an earlier timing tuned.
"""

from __future__ import annotations

_MISSING = object()


class AutotuneChoice:
    def __init__(self) -> None:
        self.want = 0
        self.widest = 0  # the most configurations one tuning kept since `select`
        self.chosen: list = []  # the configurations run since `select`, in call order
        self._position = 0  # the configuration being "timed" in the current tuning
        self._kept = 1
        self._saved: dict[
            int, tuple
        ] = {}  # id(tuner) -> (tuner, its do_bench, cache_results, its picks)
        self._patched: dict[str, object] = {}

    def select(self, want: int) -> None:
        """Run configuration `want` from now on, and start counting configurations afresh."""
        self.want, self.widest, self.chosen = want, 0, []

    def describe(self) -> str:
        """The configurations of the last calls, for a failure message ('' when none was tuned)."""
        seen = []
        for cfg in self.chosen:
            text = ", ".join(
                [f"{k}={v}" for k, v in cfg.kwargs.items()]
                + [f"num_warps={cfg.num_warps}", f"num_stages={cfg.num_stages}"]
            )
            if text not in seen:
                seen.append(text)
        return "; ".join(seen)

    def _bench(self, kernel_call, quantiles=None, **_):
        position = self._position
        self._position += 1
        score = 1.0 + position
        if position == self.want % self._kept:
            kernel_call()  # a compile error surfaces here, and the tuner skips this configuration
            score = 0.0
        return [score, score, score] if quantiles else score

    def __enter__(self) -> "AutotuneChoice":
        from triton.runtime.autotuner import Autotuner

        run, prune = Autotuner.run, Autotuner.prune_configs
        choice = self

        def chosen_run(tuner, *args, **kwargs):
            if id(tuner) not in choice._saved:
                choice._saved[id(tuner)] = (
                    tuner,
                    tuner.__dict__.get("do_bench", _MISSING),
                    tuner.cache_results,
                    dict(tuner.cache),
                )
                tuner.__dict__["do_bench"] = choice._bench  # over the cached_property
                tuner.cache_results = False  # no tuning results read from or written to the disk
            tuner.cache.clear()
            out = run(tuner, *args, **kwargs)
            choice.chosen.append(tuner.best_config)
            return out

        def counted_prune(tuner, kwargs):
            kept = prune(tuner, kwargs)
            choice._position, choice._kept = 0, max(1, len(kept))
            choice.widest = max(choice.widest, len(kept))
            return kept

        self._patched = {"run": run, "prune_configs": prune}
        Autotuner.run, Autotuner.prune_configs = chosen_run, counted_prune
        return self

    def __exit__(self, *exc) -> None:
        from triton.runtime.autotuner import Autotuner

        for name, value in self._patched.items():
            setattr(Autotuner, name, value)
        for tuner, do_bench, cache_results, picks in self._saved.values():
            if do_bench is _MISSING:
                tuner.__dict__.pop("do_bench", None)
            else:
                tuner.__dict__["do_bench"] = do_bench
            tuner.cache_results = cache_results
            tuner.cache.clear()  # the harness's picks never reach a timing: it tunes for real,
            tuner.cache.update(picks)  # or keeps what an earlier timing tuned
        self._saved.clear()

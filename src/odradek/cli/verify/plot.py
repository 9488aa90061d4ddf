"""The timeline PNG: produce latency over time, failures marked, fault windows shaded
(the way Jepsen draws its latency plots)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: draw to a file only

import matplotlib.pyplot as plt

from odradek.verify.report import Completion


def timeline(
    path: Path,
    completions: list[Completion],
    windows: list[tuple[float, float, str]],
    end_s: float,
    title: str,
) -> None:
    fig, ax = plt.subplots(figsize=(12, 5), dpi=100)
    colours = {"ok": "#1f77b4", "info": "#ff7f0e", "fail": "#d62728"}
    labels = {"ok": "ok", "info": "info (no answer in time)", "fail": "fail"}
    for kind in ("ok", "info", "fail"):
        points = [c for c in completions if c.type == kind]
        if points:
            ax.scatter(
                [c.time for c in points],
                [max(c.latency * 1000, 0.1) for c in points],
                s=4 if kind == "ok" else 10,
                c=colours[kind],
                label=f"{labels[kind]} ({len(points)})",
                marker="." if kind == "ok" else "x",
            )
    for i, (start, stop, text) in enumerate(windows):
        stop = min(stop, end_s)
        ax.axvspan(start, stop, color=f"C{i % 10}", alpha=0.15)
        ax.text(start, 1.0, text.split(" (")[0][:40], transform=ax.get_xaxis_transform(),
                rotation=90, va="top", ha="right", fontsize=7)  # fmt: skip
    ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("produce latency (ms)")
    ax.set_xlim(0, end_s)
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)

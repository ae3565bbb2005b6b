"""A trace's plot: arrivals per second over time, and the input and output length distributions."""

from __future__ import annotations

import io


def plot(records, title: str) -> bytes:
    """PNG bytes: requests per second over the trace's time, and histograms of input and output lengths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = records[0].timestamp
    times = [(r.timestamp - start) / 1000 for r in records]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), constrained_layout=True)
    bins = max(1, min(200, int(times[-1])))
    width = max(times[-1], 1.0) / bins
    axes[0].hist(times, bins=bins, range=(0, bins * width), color="tab:blue")
    axes[0].set(title="Arrivals", xlabel="time in the trace (s)", ylabel=f"requests per {width:.3g} s")
    for ax, name, color in ((axes[1], "input_length", "tab:green"), (axes[2], "output_length", "tab:orange")):
        ax.hist([getattr(r, name) for r in records], bins=50, color=color)
        ax.set(title=name.replace("_", " "), xlabel="tokens", ylabel="requests")
    fig.suptitle(title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()

"""Helm charts are read through `helm template` output, never by guessing at Go templates.

Where `helm` is on PATH a chart directory is rendered here (`helm template RELEASE CHART [-f VALUES]`);
where it is not, the chart is named among the files not read, with the command that produces the output
the import reads instead.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from workbench.errors import WorkbenchError


def is_chart(path: Path) -> bool:
    return path.is_dir() and (path / "Chart.yaml").is_file()


def render_instructions(chart: Path, values: tuple[Path, ...]) -> str:
    extra = "".join(f" -f {v}" for v in values) or " -f YOUR-VALUES.yaml"
    return (
        f"helm is not installed here, so the chart {chart} is not read (its templates are Go templates, not "
        f"manifests); render it where helm is: `helm template RELEASE {chart}{extra} > rendered.yaml`, then "
        "import rendered.yaml"
    )


def render(chart: Path, values: tuple[Path, ...], release: str = "release") -> str | None:
    """The chart rendered by `helm template`, or None when helm is not installed."""
    helm = shutil.which("helm")
    if helm is None:
        return None
    command = [helm, "template", release, str(chart), *(a for v in values for a in ("-f", str(v)))]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise WorkbenchError(
            f"{chart}: `{' '.join(command)}` failed: {done.stderr.strip()[:400]}; fix the chart or its values"
        )
    return done.stdout

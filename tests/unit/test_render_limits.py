"""Every object render emits fits the API server's size limit on ConfigMaps and Secrets
(1 MiB of data: model/sizes.py): an app's own, the hook's plan ConfigMap and its secrets
Secret.  Over it: one line naming what made it big, exit 1, nothing on stdout, no --out
directory touched."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
import yaml

from raygitops.model.sizes import MAX_DATA_BYTES, size_problem, stored_sizes
from test_render import RECREATE, cluster
from test_render_errors import assert_error, run

# text that gzip cannot shrink below three quarters: the plan stays big compressed
def noise(size: int) -> str:
    return base64.b64encode(os.urandom(size)).decode()[:size]


def reading(*names: str, kind: str = "configMapRef") -> str:
    """The test cluster, opted in, its workers reading ``names`` whole (envFrom)."""
    obj = yaml.safe_load(cluster(meta=RECREATE))
    obj["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["envFrom"] = [
        {kind: {"name": n}} for n in names]
    return yaml.safe_dump(obj)


def config_map(name: str, **data: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})


def write(tmp_path: Path, files: dict[str, str]) -> Path:
    app = tmp_path / "app"
    app.mkdir()
    (app / "raygitops.yaml").write_text("namespace: ray\n")
    for name, text in files.items():
        (app / name).write_text(text)
    return app


def test_the_count_is_the_api_servers(tmp_path: Path) -> None:
    """Values' bytes as stored: UTF-8 text, binaryData and Secret data decoded, stringData
    merged into data; keys not counted."""
    assert stored_sizes({"kind": "ConfigMap", "data": {"a": "é" * 10}, "binaryData": {"b": base64.b64encode(b"x" * 7).decode()}}) \
        == {"a": 20, "b": 7}
    secret = {"kind": "Secret", "data": {"a": base64.b64encode(b"12345").decode(), "b": "eA=="}, "stringData": {"b": "xyz"}}
    assert stored_sizes(secret) == {"a": 5, "b": 3}
    fits = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}, "data": {"k": "x" * MAX_DATA_BYTES}}
    assert size_problem("", "ConfigMap", fits) is None
    fits["data"]["k2"] = "y"
    assert "1,048,577 bytes" in size_problem("", "ConfigMap", fits)
    assert size_problem("example.com", "ConfigMap", fits) is None  # not Kubernetes' ConfigMap


def test_a_configmap_over_the_limit_is_refused_where_it_is_written(tmp_path: Path) -> None:
    app = write(tmp_path, {"c.yaml": cluster(), "big.yaml": config_map("big", a=noise(600_000), b=noise(500_000))})
    assert_error(run(["render", str(app)]), f"{app}/big.yaml", 1,
                 r"ConfigMap big: its data and binaryData hold 1,100,000 bytes, over the 1,048,576 the API "
                 r"server allows \(largest keys, bytes: a 600,000, b 500,000\)")


def test_a_secret_over_the_limit_counts_string_data(tmp_path: Path) -> None:
    secret = yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                             "data": {"a": base64.b64encode(b"x" * 600_000).decode()},
                             "stringData": {"b": "y" * 500_000}})
    app = write(tmp_path, {"c.yaml": cluster(), "s.yaml": secret})
    assert_error(run(["render", str(app)]), f"{app}/s.yaml", 1, r"Secret creds: its data hold 1,100,000 bytes")


def test_a_plan_carrying_two_big_configmaps_is_refused_naming_them(tmp_path: Path) -> None:
    """Issue 37: two valid 760 KB ConfigMaps read by one group made a 1,164,678-byte plan,
    exit 0, refused by the API server at sync time.  Now: the plan's size and the two
    ConfigMaps named, nothing written (stdout, --out)."""
    app = write(tmp_path, {"c.yaml": reading("big-a", "big-b"), "a.yaml": config_map("big-a", blob=noise(760_000)),
                           "b.yaml": config_map("big-b", blob=noise(760_000))})
    for args in (["render", str(app)], ["render", str(app), "--output-dir", str(tmp_path / "out")]):
        result = run(args)
        assert result.exit_code == 1 and result.stdout == "", result.stderr
        (line,) = result.stderr.splitlines()
        assert line.startswith("raygitops: the hook's plan for namespace ray (ConfigMap raygitops-plan) would hold "), line
        assert "bytes compressed, over the 1,048,576 the API server allows" in line
        assert "(bytes: big-a 760,000, big-b 760,000)" in line and "raygitops.dev/hash-config" in line
    assert not (tmp_path / "out").exists()
    # one of them alone fits (gzip'ed into binaryData): the same app renders
    (app / "b.yaml").unlink()
    (app / "c.yaml").write_text(reading("big-a"))
    ok = run(["render", str(app)])
    assert ok.exit_code == 0, ok.stderr
    (plan,) = [d for d in yaml.safe_load_all(ok.stdout) if d and d["metadata"]["name"] == "raygitops-plan"]
    assert size_problem("", "ConfigMap", plan) is None and list(plan["binaryData"]) == ["plan.json.gz"]


def test_the_hook_secrets_file_over_the_limit_names_the_secrets(tmp_path: Path) -> None:
    def secret(name: str) -> str:
        return yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                               "stringData": {"blob": noise(700_000)}})
    app = write(tmp_path, {"c.yaml": reading("s-a", "s-b", kind="secretRef"), "a.yaml": secret("s-a"),
                           "b.yaml": secret("s-b")})
    result = run(["render", str(app)])
    assert result.exit_code == 1 and result.stdout == "", result.stderr
    assert "the hook's secrets file for namespace ray (Secret raygitops-plan-secrets) would hold" in result.stderr
    assert "(bytes: s-a 700,000, s-b 700,000)" in result.stderr


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_every_emitted_configmap_and_secret_fits(tmp_path: Path, fmt: str) -> None:
    """A near-limit app renders, and every ConfigMap and Secret it emits fits."""
    app = write(tmp_path, {"c.yaml": reading("near"), "n.yaml": config_map("near", a=noise(MAX_DATA_BYTES - 10))})
    result = run(["render", str(app), "-o", fmt])
    assert result.exit_code == 0, result.stderr
    docs = yaml.safe_load(result.stdout)["items"] if fmt == "json" else [d for d in yaml.safe_load_all(result.stdout) if d]
    for doc in docs:
        assert size_problem("", doc["kind"], doc) is None, doc["metadata"]["name"]

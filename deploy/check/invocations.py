"""Runs the gateway binary's `--check-config` with exactly the flags, environment and
configuration file each deployment gives it, so that a manifest naming a flag or key the binary
lacks fails here rather than in a cluster:

- deploy/compose/docker-compose.yml: each service built from this repository (its `command`
  and `environment`, over the Dockerfile's `ENV`); the file is also parsed by a compose-spec
  validator (unknown keys and wrong types are refused);
- every Deployment's `mrtr-gateway` container in the given manifest files (plain manifests and
  rendered charts): its `args` and `env`, and the ConfigMap it mounts as its config file.

Paths inside the pod (the key ring, the config file) are mapped to temporary files.

    python invocations.py BINARY DOCKERFILE COMPOSE MANIFEST...
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from compose_spec import PyCompose

CONFIG_PATH = "/etc/mrtr-gateway/gateway.toml"
KEY_PREFIXES = ("/etc/mrtr-gateway/keys/", "/run/secrets/")
TEST_KEY = "k1:" + "A" * 43 + "=\n"


class Checker:
    def __init__(self, binary: str, scratch: Path):
        self.binary = binary
        self.scratch = scratch
        self.key_file = scratch / "keys"
        self.key_file.write_text(TEST_KEY)
        self.failures = 0

    def local(self, text: str) -> str:
        for prefix in KEY_PREFIXES:
            text = re.sub(re.escape(prefix) + r"[\w.-]+", str(self.key_file), text)
        return text

    def run(self, name: str, args: list[str], env: dict[str, str], config: str | None) -> None:
        args = [self.local(a) for a in args]
        if config is not None:
            path = self.scratch / (re.sub(r"[^\w-]", "_", name) + ".toml")
            path.write_text(self.local(config))
            args = [str(path) if a == CONFIG_PATH else a for a in args]
        env = {k: self.local(v) for k, v in env.items()}
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
        done = subprocess.run(
            [self.binary, *args, "--check-config"], env=full_env, capture_output=True, text=True, timeout=60
        )
        if done.returncode == 0:
            print(f"  ok: {name}: mrtr-gateway {' '.join(args)}")
        else:
            self.failures += 1
            print(f"  FAILED: {name} (exit {done.returncode}): {done.stderr.strip()}", file=sys.stderr)


# What the downward API gives the variables the chart takes from it, for --check-config.
FIELD_EXAMPLES = {"status.podIP": "10.0.0.7"}


def container_env(container: dict) -> dict[str, str]:
    """A container's environment as Kubernetes sets it: downward-API fields get an example
    value, and `$(NAME)` references to variables defined before are expanded."""
    env: dict[str, str] = {}
    for e in container.get("env") or []:
        if "value" in e:
            env[e["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), e["value"])
        elif "fieldRef" in (e.get("valueFrom") or {}):
            env[e["name"]] = FIELD_EXAMPLES[e["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def dockerfile_env(dockerfile: Path) -> dict[str, str]:
    text = dockerfile.read_text().replace("\\\n", " ")
    env = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            env.update(dict(re.findall(r"(MRTR_GATEWAY__\w+)=(\S+)", line)))
    return env


def check_compose(checker: Checker, compose: Path, image_env: dict[str, str]) -> None:
    spec = yaml.safe_load(compose.read_text())
    PyCompose.from_json(json.dumps(spec))  # raises ValueError on an invalid file
    print(f"  ok: {compose.name} is a valid compose file")
    for name, service in spec["services"].items():
        if "build" not in service:
            continue
        env = {**image_env, **{k: str(v) for k, v in (service.get("environment") or {}).items()}}
        checker.run(f"{compose.name}:{name}", list(service.get("command") or []), env, None)


def check_manifests(checker: Checker, path: Path) -> int:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    maps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    found = 0
    for d in docs:
        if d["kind"] != "Deployment":
            continue
        pod = d["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod.get("volumes") or []}
        for c in pod["containers"]:
            if c["name"] != "mrtr-gateway":
                continue
            found += 1
            env = container_env(c)
            config = None
            for m in c.get("volumeMounts") or []:
                if m["mountPath"] == CONFIG_PATH:
                    cm = maps[volumes[m["name"]]["configMap"]["name"]]
                    config = cm["data"][m.get("subPath", "gateway.toml")]
            checker.run(f"{path.name}:{d['metadata']['name']}", list(c.get("args") or []), env, config)
    return found


def main() -> None:
    binary, dockerfile, compose, manifests = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
    with tempfile.TemporaryDirectory() as scratch:
        checker = Checker(binary, Path(scratch))
        check_compose(checker, compose, dockerfile_env(dockerfile))
        for m in manifests:
            if check_manifests(checker, Path(m)) == 0:
                print(f"  FAILED: {m} has no mrtr-gateway container", file=sys.stderr)
                checker.failures += 1
    if checker.failures:
        raise SystemExit(f"{checker.failures} deployment invocation(s) refused by the gateway")


if __name__ == "__main__":
    main()

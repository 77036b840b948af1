"""Renders the Helm chart with Helm's own engine (helm-python-sdk) from a chain of values files,
merged as `helm template -f A -f B` merges them (maps key by key, anything else replaced), and
writes the manifests for `podman kube play` with these changes, and no other:
- `hostNetwork: true` on the pod template, so that every pod listens on the host's loopback;
  then the containers' `ports` go (podman publishes each containerPort, which host networking
  refuses) once each probe's named port is replaced by its number, and the downward API's
  `status.podIP`, which podman does not support, by the host network's address, 127.0.0.1,
  and each `$(NAME)` in a later variable by the value, as the kubelet would (podman does not);
- podman 4.3 ignores `subPath` and mounts the whole volume at the file's path: such a volume is
  mounted as a folder beside the file (`gateway.toml` at `/etc/mrtr-gateway/gateway.toml.d/`),
  and an argument naming the file names it there;
- each Secret becomes a ConfigMap of the same name and keys, and each secret volume a configMap
  volume of that name: podman 4.3's kube play dereferences a nil secrets manager on a secret
  volume and crashes, while it mounts a ConfigMap from the same file. The key ring reaches the
  same path with the same content.

    python render.py CHART OUT.yaml RELEASE VALUES.yaml [VALUES.yaml ...] [--facts PREFIX]

With --facts, it also writes what the chart sets for the gateway container, for the run to
check against the running pod: PREFIX.probes (one line per probe: container, probe, port
number, path) and PREFIX.security.json (its securityContext, and the pod's grace period as
`grace`).
"""

import base64
import json
import sys
from pathlib import Path

import yaml
from helm_python import chart as helm

NAMESPACE = "default"
HOST_NETWORK_IP = "127.0.0.1"


def merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def as_config_map(secret: dict) -> dict:
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    data.update(secret.get("stringData") or {})
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": secret["metadata"], "data": data}


def on_host_network(container: dict) -> None:
    numbers = {p["name"]: p["containerPort"] for p in container.pop("ports", []) if "name" in p}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container.get(probe, {}).get("httpGet")
        if get and get["port"] in numbers:
            get["port"] = numbers[get["port"]]
    seen = {}
    for env in container.get("env", []):
        if env.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP":
            env.pop("valueFrom")
            env["value"] = HOST_NETWORK_IP
        if "value" in env:
            for name, value in seen.items():
                env["value"] = env["value"].replace(f"$({name})", value)
            seen[env["name"]] = env["value"]


def without_sub_paths(container: dict) -> None:
    renamed = {}
    for mount in container.get("volumeMounts", []):
        if "subPath" in mount:
            folder = mount["mountPath"] + ".d"
            renamed[mount["mountPath"]] = f"{folder}/{mount.pop('subPath')}"
            mount["mountPath"] = folder
    for key in ("command", "args"):
        if key in container:
            container[key] = [renamed.get(a, a) for a in container[key]]


def write_facts(prefix: Path, manifests: list) -> None:
    (deployment,) = [m for m in manifests if m["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (gateway,) = [c for c in pod["containers"] if c["name"] == "mrtr-gateway"]
    lines = []
    for container in pod["containers"]:
        numbers = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            get = container.get(probe, {}).get("httpGet")
            if get:
                lines.append(f"{container['name']} {probe} {numbers.get(get['port'], get['port'])} {get['path']}\n")
    prefix.with_suffix(".probes").write_text("".join(lines))
    security = dict(gateway.get("securityContext") or {}, grace=pod["terminationGracePeriodSeconds"])
    prefix.with_suffix(".security.json").write_text(json.dumps(security))


def main() -> None:
    args = sys.argv[1:]
    facts = None
    if "--facts" in args:
        at = args.index("--facts")
        facts = Path(args[at + 1])
        del args[at : at + 2]
    chart_dir, out, release = Path(args[0]), Path(args[1]), args[2]
    values: dict = {}
    for path in args[3:]:
        values = merge(values, yaml.safe_load(Path(path).read_text()) or {})
    rendered = helm.Chart.load(chart_dir).render(values=values, name=release, namespace=NAMESPACE, is_install=True)
    docs = [m for path, m in sorted(rendered.items()) if path.endswith(".yaml") and m.strip()]
    manifests = [d for d in yaml.safe_load_all("\n---\n".join(docs)) if d]
    if facts:
        write_facts(facts, manifests)
    manifests = [as_config_map(m) if m["kind"] == "Secret" else m for m in manifests]
    for m in manifests:
        if m["kind"] == "Deployment":
            pod = m["spec"]["template"]["spec"]
            pod["hostNetwork"] = True
            for container in pod["containers"]:
                on_host_network(container)
                without_sub_paths(container)
            for volume in pod.get("volumes", []):
                if "secret" in volume:
                    volume["configMap"] = {"name": volume.pop("secret")["secretName"]}
    out.write_text(yaml.safe_dump_all(manifests, sort_keys=False))
    print(f"  {release}: {', '.join(sorted(m['kind'] for m in manifests))}", file=sys.stderr)


if __name__ == "__main__":
    main()

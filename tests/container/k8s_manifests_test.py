#!/usr/bin/env python3
"""The Kubernetes manifests of dist/k8s/ say what docs/containers.md says they do.

No cluster is at hand, kubectl's --dry-run=client still asks a server for its API groups,
and Debian 12's kubernetes-client (1.20) predates hostUsers: so each document is parsed
(python3-yaml) and its fields are checked against the rules of the Pod, Service and
Secret schemas that a mistake would break: names, the container sbshd runs in, its probes,
volumes and limits, what --confine needs, and the Service reaching the MCP port with the
Secret's token. Usage: k8s_manifests_test.py SOURCE_DIR
"""
import os
import re
import sys
import unittest

import yaml

SRC = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
K8S = os.path.join(SRC, "dist", "k8s")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$")


def load(name):
    with open(os.path.join(K8S, name), encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def by_kind(docs):
    return {d["kind"]: d for d in docs}


class SandboxPod(unittest.TestCase):
    def setUp(self):
        docs = load("sandbox-pod.yaml")
        self.assertEqual(len(docs), 1)
        self.pod = docs[0]
        self.spec = self.pod["spec"]
        self.containers = {c["name"]: c for c in self.spec["containers"]}

    def test_it_is_a_pod_with_valid_names(self):
        self.assertEqual(self.pod["apiVersion"], "v1")
        self.assertEqual(self.pod["kind"], "Pod")
        self.assertRegex(self.pod["metadata"]["name"], DNS_LABEL)
        for name in self.containers:
            self.assertRegex(name, DNS_LABEL)
        # kubectl:// without a container reaches sbshd's.
        self.assertEqual(self.pod["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"], "sbshd")
        self.assertEqual(self.spec["containers"][0]["name"], "sbshd")

    def test_sbshd_is_the_main_process_with_probes_and_limits(self):
        c = self.containers["sbshd"]
        self.assertEqual(c["args"][:2], ["sbshd", "--foreground"])
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            self.assertEqual(c[probe]["exec"]["command"], ["sbsh", "status"], probe)
        for kind in ("requests", "limits"):
            for res in ("cpu", "memory"):
                self.assertRegex(str(c["resources"][kind][res]), QUANTITY, f"{kind}.{res}")
        env = {e["name"]: e["value"] for e in c["env"]}
        self.assertEqual(env["SBSH_NO_AUTOSTART"], "1")  # no second sbshd from a probe or an exec
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        self.assertEqual(mounts[env["SBSH_STATE_DIR"]], "state")
        self.assertEqual(mounts[env["XDG_RUNTIME_DIR"]], "runtime")
        volumes = {v["name"] for v in self.spec["volumes"]}
        for container in self.spec["containers"]:
            for m in container.get("volumeMounts", []):
                self.assertIn(m["name"], volumes)
        self.assertGreaterEqual(self.spec["terminationGracePeriodSeconds"], 10)

    def test_the_security_context_is_what_confine_needs(self):
        # The image's user, never root; user namespaces of the pod's own, /proc unmasked and
        # a seccomp profile that lets sbshd make namespaces (docs/containers.md).
        self.assertEqual(self.spec["securityContext"]["runAsUser"], 1000)
        self.assertTrue(self.spec["securityContext"]["runAsNonRoot"])
        self.assertIs(self.spec["hostUsers"], False)
        sc = self.containers["sbshd"]["securityContext"]
        self.assertIs(sc["allowPrivilegeEscalation"], False)
        self.assertEqual(sc["capabilities"]["drop"], ["ALL"])
        self.assertEqual(sc["procMount"], "Unmasked")  # valid only with hostUsers: false
        self.assertIn(sc["seccompProfile"]["type"], ("Unconfined", "Localhost"))

    def test_the_mcp_container_serves_http_with_the_secrets_token(self):
        c = self.containers["mcp"]
        args = c["args"]
        self.assertEqual(args[:3], ["sbsh", "mcp", "--http"])
        self.assertIn("--allow-remote", args)
        token = args[args.index("--token-file") + 1]
        port = int(args[args.index("--http") + 1].rsplit(":", 1)[1])
        self.assertEqual(c["ports"][0]["containerPort"], port)
        mount = next(m for m in c["volumeMounts"] if token.startswith(m["mountPath"] + "/"))
        volume = next(v for v in self.spec["volumes"] if v["name"] == mount["name"])
        self.assertEqual(volume["secret"]["secretName"], "sbsh-mcp-token")
        key = token[len(mount["mountPath"]) + 1:]
        secret = by_kind(load("mcp-service.yaml"))["Secret"]
        self.assertIn(key, secret["stringData"])
        self.assertGreaterEqual(len(secret["stringData"][key]), 16)  # sbsh mcp's shortest token
        # It reaches sbshd through the same runtime directory.
        sbshd_env = {e["name"]: e["value"] for e in self.containers["sbshd"]["env"]}
        mcp_env = {e["name"]: e["value"] for e in c["env"]}
        self.assertEqual(mcp_env["XDG_RUNTIME_DIR"], sbshd_env["XDG_RUNTIME_DIR"])


class McpService(unittest.TestCase):
    def test_the_service_selects_the_sandbox_and_its_mcp_port(self):
        docs = by_kind(load("mcp-service.yaml"))
        svc = docs["Service"]
        pod = load("sandbox-pod.yaml")[0]
        labels = pod["metadata"]["labels"]
        for k, v in svc["spec"]["selector"].items():
            self.assertEqual(labels.get(k), v, k)
        port = svc["spec"]["ports"][0]
        named = {p["name"]: p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
        self.assertIn(port["targetPort"], named)
        self.assertEqual(port["port"], named[port["targetPort"]])
        self.assertRegex(svc["metadata"]["name"], DNS_LABEL)


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""The Kubernetes manifests of examples/kubernetes/ (docs/kubernetes.md), without a cluster:

* indexed-job.yaml validates against the Kubernetes 1.33 schemas (kubernetes-validate, strict:
  an unknown field is an error), and its pods run for real as local processes with exactly
  the environment the manifest writes (only rank 0's cluster DNS name becomes 127.0.0.1);
* mpijob.yaml validates against the MPIJob CRD schema published by kubeflow/mpi-operator
  (tests/data, vendored), made strict the way the API server prunes: a field the schema does
  not name would be dropped silently, so it is an error here.
"""

import copy
import gzip
import os
import shutil
import subprocess
import sys

import pytest

yaml = pytest.importorskip("yaml")
jsonschema = pytest.importorskip("jsonschema")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

from tests.helpers import REPO_ROOT, job_env
from tests.ports import unused_port

EXAMPLES = os.path.join(REPO_ROOT, "examples", "kubernetes")
MPIJOB_CRD = os.path.join(REPO_ROOT, "tests", "data", "mpijob-v2beta1-crd.yaml.gz")
KUBERNETES_VERSION = "1.33.0"


def load_all(name):
    with open(os.path.join(EXAMPLES, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def indexed_job():
    service, job = load_all("indexed-job.yaml")
    assert (service["kind"], job["kind"]) == ("Service", "Job")
    return service, job


# ---- schemas -------------------------------------------------------------------------------

def test_indexed_job_manifest_is_valid_kubernetes():
    for document in load_all("indexed-job.yaml"):
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_the_kubernetes_validation_is_strict():
    _, job = indexed_job()
    typo = copy.deepcopy(job)
    typo["spec"]["completionmode"] = typo["spec"].pop("completionMode")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, KUBERNETES_VERSION, strict=True)


def _pruning(schema):
    """The schema with ``additionalProperties: false`` wherever an object names its
    properties (the API server prunes unknown fields there)."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node \
                    and not node.get("x-kubernetes-preserve-unknown-fields"):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


@pytest.fixture(scope="module")
def mpijob_validator():
    with gzip.open(MPIJOB_CRD, "rt") as f:
        crd = yaml.safe_load(f)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v2beta1"]
    return jsonschema.Draft7Validator(_pruning(version["schema"]["openAPIV3Schema"]))


def test_mpijob_manifest_matches_the_operators_crd(mpijob_validator):
    (job,) = load_all("mpijob.yaml")
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v2beta1", "MPIJob")
    errors = [f"{list(e.path)}: {e.message}" for e in mpijob_validator.iter_errors(job)]
    assert not errors, errors
    # The pod templates are Kubernetes pod templates too.
    for role in ("Launcher", "Worker"):
        template = job["spec"]["mpiReplicaSpecs"][role]["template"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": role.lower()}, "spec": template["spec"]}
        kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("change, field", [
    (lambda s: s.update(slotsPerWorker="one"), "slotsPerWorker"),
    (lambda s: s.update(slotPerWorker=1), "slotPerWorker"),
    (lambda s: s["mpiReplicaSpecs"]["Worker"].update(replica=2), "replica"),
])
def test_the_mpijob_validation_catches_mistakes(mpijob_validator, change, field):
    (job,) = load_all("mpijob.yaml")
    change(job["spec"])
    assert any(field in e.message or field in map(str, e.path) for e in mpijob_validator.iter_errors(job))


# ---- the Indexed Job's pods, run as local processes ---------------------------------------

def pod_environment(job, index, secrets, store_address):
    """The TFRING_* variables of pod ``index``, resolved as the kubelet would."""
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
            continue
        source = item["valueFrom"]
        if "fieldRef" in source:
            assert source["fieldRef"]["fieldPath"] == "metadata.labels['batch.kubernetes.io/job-completion-index']"
            env[item["name"]] = str(index)
        else:
            ref = source["secretKeyRef"]
            env[item["name"]] = secrets[ref["name"]][ref["key"]]
    host, port = env["TFRING_STORE_ADDR"].rsplit(":", 1)
    service, _ = indexed_job()
    assert host == f"{job['metadata']['name']}-0.{service['metadata']['name']}", "pod 0's DNS name"
    assert int(port) == service["spec"]["ports"][0]["port"]
    env["TFRING_STORE_ADDR"] = store_address
    return env


@pytest.mark.multiprocess
@pytest.mark.timeout(180)
def test_indexed_job_pods_train_as_local_processes(tmp_path):
    import secrets as secret_module

    _, job = indexed_job()
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"]
    (container,) = spec["template"]["spec"]["containers"]
    secrets = {"tfring-digits-secret": {"secret": secret_module.token_hex(32)}}
    store_address = f"127.0.0.1:{unused_port()}"
    # The container's working directory: the repo's examples, as the image would hold them.
    os.symlink(os.path.join(REPO_ROOT, "examples"), tmp_path / "examples")
    procs = []
    for index in range(spec["completions"]):
        env = job_env({**pod_environment(job, index, secrets, store_address), "TFRING_START_TIMEOUT_S": "60"})
        procs.append(subprocess.Popen([sys.executable if c == "python" else c for c in container["command"]],
                                      cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=150)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs), "\n----\n".join(outputs)
    assert "test accuracy" in outputs[0].lower(), outputs[0]
    assert os.path.isdir(tmp_path / "runs" / "keras_digits"), "rank 0 wrote its outputs in the working directory"
    shutil.rmtree(tmp_path / "runs")

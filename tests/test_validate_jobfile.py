"""``invoke validate --job FILE`` (issue 24): a user's MPIJob manifest or Slurm batch script judged by the rules
chexstack's own renders obey. Every rendered golden passes; each hand-written fault of a golden is named with its
code and its line."""
from __future__ import annotations

import json

import jsonschema
import pytest

from launch.failure import GPU_LAUNCH_REMEDY, LAUNCH_REMEDY, pyxis_remedy
from launch.k8s import RDMA_RESOURCES, is_rdma_resource
from tests.lib import cli as cmd
from tests.lib.paths import REPO
from validate import report_schema
from validate.catalogue import CODES
from validate.jobfile import job_report, judge_file, judge_job, rule_result
from validate.jobrules import MPIJOB as MPIJOB_KIND
from validate.jobrules import SBATCH as SBATCH_KIND
from validate.jobrules import rules_for
from validate.slurmlayout import gres_gpus, read_options

GOLDEN = REPO / "tests" / "golden"
JOB_GOLDENS = sorted([*GOLDEN.glob("launch/*.sbatch"), *GOLDEN.glob("launch/*.yaml"), *GOLDEN.glob("bench/*.sbatch"),
                      *GOLDEN.glob("bench/*.yaml")])


@pytest.mark.parametrize("golden", JOB_GOLDENS, ids=[p.name for p in JOB_GOLDENS])
def test_our_own_renders_pass(golden):
    kind, findings = judge_job(str(golden))
    assert kind == ("MPIJob" if golden.suffix == ".yaml" else "Slurm batch script")
    assert findings == [], [f.text() for f in findings]


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _variant(tmp_path, golden: str, old: str, new: str, count: int = 1):
    text = (GOLDEN / golden).read_text()
    assert text.count(old) >= count, old
    changed = text.replace(old, new, count)
    path = tmp_path / golden.rsplit("/", 1)[1]
    path.write_text(changed)
    return path, changed


SBATCH_FAULTS = [
    # (golden, old, new, code, status, the line's marker in the variant)
    ("launch/slurm-pyxis-2x4gpu.sbatch", "srun --mpi=pmix ", "srun --mpi=pmi2 ", "MPI_PMI_MISMATCH", "FAIL",
     "srun --mpi=pmi2"),
    ("launch/slurm-pyxis-2x4gpu.sbatch", "#SBATCH --ntasks-per-node=4", "#SBATCH --ntasks-per-node=8",
     "NCCL_DUPLICATE_GPU", "FAIL", "--ntasks-per-node=8"),
    ("launch/slurm-pyxis-2x4gpu.sbatch", "#SBATCH --ntasks-per-node=4", "#SBATCH --ntasks-per-node=2",
     "JOB_GPUS_IDLE", "WARN", "--ntasks-per-node=2"),
    ("launch/slurm-hybrid-2x4gpu.sbatch", "mpirun -np 8 ", "mpirun -np 16 ", "MPI_NOT_ENOUGH_SLOTS", "FAIL",
     "mpirun -np 16"),
    ("launch/slurm-hybrid-2x4gpu.sbatch", "export OMPI_MCA_btl_vader_single_copy_mechanism=none\n"
     "export OMPI_MCA_smsc='^cma'\n", "", "MPI_SINGLE_COPY_CMA", "WARN", "mpirun -np 8"),
    ("launch/slurm-pyxis-2x4gpu.sbatch", "export NCCL_DEBUG=INFO\n", "", "JOB_ENV_NOT_EXPORTED", "WARN",
     "srun --mpi=pmix '--container"),
]


@pytest.mark.parametrize("golden,old,new,code,status,marker", SBATCH_FAULTS, ids=[f[3] for f in SBATCH_FAULTS])
def test_a_faulty_batch_script_is_named_with_its_line(tmp_path, golden, old, new, code, status, marker):
    path, text = _variant(tmp_path, golden, old, new)
    _, findings = judge_job(str(path))
    assert [(f.code, f.status, f.line) for f in findings] == [(code, status, _line_of(text, marker))]
    assert findings[0].remedy


@pytest.mark.parametrize("kept", ["export OMPI_MCA_btl_vader_single_copy_mechanism=none\n",
                                  "export OMPI_MCA_smsc='^cma'\n"], ids=["before-5", "since-5"])
def test_either_release_form_of_the_single_copy_switch_is_taken(tmp_path, kept):
    """The image's Open MPI is not in the script: Open MPI 4's btl_vader form or 5's smsc form alone is no fault."""
    both = "export OMPI_MCA_btl_vader_single_copy_mechanism=none\nexport OMPI_MCA_smsc='^cma'\n"
    path, _ = _variant(tmp_path, "launch/slurm-hybrid-2x4gpu.sbatch", both, kept)
    _, findings = judge_job(str(path))
    assert not findings, [f.text() for f in findings]


MPIJOB = "launch/mpijob-2x4gpu-rdma.yaml"
MPIJOB_FAULTS = [
    ("slotsPerWorker: 4", "slotsPerWorker: 8", "NCCL_DUPLICATE_GPU", "FAIL", "slotsPerWorker: 8"),
    ("- '8'\n", "- '12'\n", "MPI_NOT_ENOUGH_SLOTS", "FAIL", "- '12'"),
    ("            - name: dshm\n              mountPath: /dev/shm\n", "", "NCCL_SHM_TOO_SMALL", "FAIL",
     "- name: worker"),
    ("sizeLimit: 1Gi", "sizeLimit: 64Mi", "NCCL_SHM_TOO_SMALL", "FAIL", "sizeLimit: 64Mi"),
    ("            securityContext:\n              capabilities:\n                add:\n"
     "                - IPC_LOCK\n", "", "NCCL_SOCKET_FALLBACK", "FAIL", "rdma/hca_shared_devices_a: 1"),
    ("  launcherCreationPolicy: WaitForWorkersReady\n", "", "MPI_HOST_UNKNOWN", "WARN", "spec:"),
    ("            - --allow-run-as-root\n", "", "MPI_RUN_AS_ROOT", "FAIL", "command:"),
    ("            - -x\n            - LD_LIBRARY_PATH\n", "", "JOB_ENV_NOT_EXPORTED", "WARN", "command:"),
]


@pytest.mark.parametrize("old,new,code,status,marker", MPIJOB_FAULTS, ids=[f[2] + str(i) for i, f in
                                                                           enumerate(MPIJOB_FAULTS)])
def test_a_faulty_mpijob_is_named_with_its_line(tmp_path, old, new, code, status, marker):
    path, text = _variant(tmp_path, MPIJOB, old, new)
    _, findings = judge_job(str(path))
    assert [(f.code, f.status) for f in findings] == [(code, status)], [f.text() for f in findings]
    assert findings[0].line == _line_of(text, marker)


def test_the_entry_prints_file_and_line_and_exits_1_on_a_fail(tmp_path):
    path, text = _variant(tmp_path, MPIJOB, "slotsPerWorker: 4", "slotsPerWorker: 8")
    result = cmd.run("validate", "--job", str(path))
    assert result.returncode == 1
    assert "%s:%d: FAIL NCCL_DUPLICATE_GPU: slotsPerWorker 8 on 4 GPUs" % (path, _line_of(text, "slotsPerWorker"))\
        in result.stdout and "1 FAIL, 0 WARN" in result.stdout
    ok = cmd.run("validate", "--job", str(GOLDEN / "launch" / "slurm-pyxis-2x4gpu.sbatch"))
    assert ok.returncode == 0 and "0 FAIL, 0 WARN" in ok.stdout


@pytest.mark.parametrize("old, new, field, expected", [
    ("replicas: 2", "replicas: two", "spec.mpiReplicaSpecs.Worker.replicas 'two'", "a whole number"),
    ("replicas: 2", "replicas: true", "spec.mpiReplicaSpecs.Worker.replicas True", "a whole number"),
    ("slotsPerWorker: 4", "slotsPerWorker: '4'", "spec.slotsPerWorker '4'", "a whole number"),
    ("    Worker:\n", "    Worker: 5\n    Unused:\n", "spec.mpiReplicaSpecs.Worker 5", "a mapping"),
    ("          containers:\n          - name: worker",
     "          containers: worker\n          xs:\n          - name: w",
     "spec.mpiReplicaSpecs.Worker.template.spec.containers 'worker'", "a list"),
    ("              limits:\n                nvidia.com/gpu: 4\n                rdma/hca_shared_devices_a: 1\n",
     "              limits: four\n", "resources.limits 'four'", "a mapping"),
    ("            - mpirun\n", "            - [mpirun]\n", "containers[0].command[0] ['mpirun']",
     "a string or number"),
    ("                add:\n                - IPC_LOCK", "                add: IPC_LOCK", ".add 'IPC_LOCK'", "a list"),
    ("              sizeLimit: 1Gi", "              sizeLimit: {a: 1}", ".sizeLimit {'a': 1}", "a string or number"),
    ("  launcherCreationPolicy: WaitForWorkersReady", "  launcherCreationPolicy: [x]", "", "a string"),
])
def test_an_mpijob_field_of_the_wrong_type_is_refused_with_its_line(tmp_path, old, new, field, expected):
    """Every field the MPIJob rules read is type-checked: a wrong type is one ``error: --job FILE:LINE: FIELD VALUE:
    expected TYPE`` line and exit 2, never a traceback and never a rule judged on what could not be read."""
    path, text = _variant(tmp_path, MPIJOB, old, new)
    result = cmd.run("validate", "--job", str(path), expect=2)
    line = _line_of(text, new.strip().splitlines()[0])
    assert result.stderr.startswith("error: --job %s:%d: " % (path, line)), result.stderr
    assert field in result.stderr and result.stderr.rstrip().endswith("expected %s" % expected), result.stderr
    assert "Traceback" not in result.stderr and "PASS" not in result.stdout


def test_an_mpijob_whose_spec_is_no_mapping_is_refused(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nspec: 5\n")
    result = cmd.run("validate", "--job", str(path), expect=2)
    assert result.stderr == "error: --job %s:3: spec 5: expected a mapping\n" % path


def test_the_entry_refuses_what_it_cannot_judge(tmp_path):
    other = tmp_path / "pod.yaml"
    other.write_text("kind: Pod\n")
    result = cmd.run("validate", "--job", str(other))
    assert result.returncode == 2 and "neither a Slurm batch script" in result.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: MPIJob\nspec: [\n")
    result = cmd.run("validate", "--job", str(broken))
    assert result.returncode == 2 and "--job %s:" % broken in result.stderr and "not YAML" in result.stderr
    for name, data, why in [("latin1.sbatch", b"#!/bin/bash\n#SBATCH -J caf\xe9\n",
                              "not a text file (byte 0xe9 at offset 26 is not UTF-8)"),
                             ("image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
                              "not a text file (a NUL byte at offset 8)")]:
        (tmp_path / name).write_bytes(data)
        result = cmd.run("validate", "--job", str(tmp_path / name))
        said = result.stderr.replace("\n", " ")
        expected = "--job %s: %s; expected an MPIJob manifest" % (tmp_path / name, why)
        assert result.returncode == 2 and expected in said, result.stderr
    both = cmd.run("validate", "--job", str(other), "--hosts", "a,b")
    assert both.returncode == 2 and "leave out --hosts" in both.stderr


def test_the_mpijob_of_a_public_report_gets_each_finding(tmp_path):
    """The manifest of https://github.com/kubeflow/mpi-operator/issues/488 (its launcher log: "bash: orted: command
    not found"): one GPU and one slot per worker, so no /dev/shm rule; it starts the launcher at once and exports
    nothing to the ranks."""
    path = tmp_path / "cuquantum.yaml"
    path.write_text("""apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: cuqantum-mpi
spec:
  slotsPerWorker: 1
  runPolicy:
    cleanPodPolicy: Running
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
         spec:
           containers:
           - image: gaoxin2020/cuquantum-mpi-test:v0.1
             name: cuqantum-mpi
             command:
             - mpirun
             - --allow-run-as-root
             - -np
             - "4"
             - python
             - /examples/example22_mpi_auto.py
    Worker:
      replicas: 4
      template:
        spec:
          containers:
          - image: gaoxin2020/cuquantum-mpi-test:v0.1
            name: cuqantum-mpi
            resources:
              limits:
                nvidia.com/gpu: 1
""")
    _, findings = judge_job(str(path))
    assert [(f.code, f.line) for f in sorted(findings, key=lambda f: f.line)] == [
        ("MPI_HOST_UNKNOWN", 5), ("JOB_ENV_NOT_EXPORTED", 17)]
    assert "launcherCreationPolicy not set (AtStartup)" in findings[0].message


def test_the_json_report_of_a_job_file_is_the_published_schema(tmp_path):
    """``--job FILE --json OUT``: the node report's schema (validate/schema/report-v1.json), ``selection: job``, one
    result per rule of the file's kind under its catalogued id, each non-PASS with its code and action; a clean
    golden gives every rule a PASS."""
    schema = json.loads(report_schema.REPORT_FILE.read_text())
    path, text = _variant(tmp_path, MPIJOB, "slotsPerWorker: 4", "slotsPerWorker: 8")
    out = tmp_path / "job.json"
    result = cmd.run("validate", "--job", str(path), "--json", str(out))
    assert result.returncode == 1, result.stderr
    report = json.loads(out.read_text())
    jsonschema.Draft202012Validator(schema).validate(report)
    assert (report["selection"], report["job"], report["exit_code"]) == ("job", {"path": str(path),
                                                                                 "kind": "MPIJob"}, 1)
    assert [r["id"] for r in report["results"]] == rules_for(MPIJOB_KIND)
    assert set(rules_for(MPIJOB_KIND)) <= set(json.loads(report_schema.CATALOGUE_FILE.read_text())["job_rules"])
    by_id = {r["id"]: r for r in report["results"]}
    bad = by_id["job.rank_per_gpu"]
    assert (bad["status"], bad["diagnosis"], bad["action"]) == ("FAIL", "NCCL_DUPLICATE_GPU",
                                                                CODES["NCCL_DUPLICATE_GPU"].action.word)
    assert bad["measured"].startswith("%s:%d: slotsPerWorker 8" % (path, _line_of(text, "slotsPerWorker")))
    assert report["summary"] == {"PASS": len(by_id) - 1, "SKIP": 0, "WARN": 0, "FAIL": 1, "ERROR": 0}
    assert report["action"] == bad["action"]

    clean = tmp_path / "clean.json"
    assert cmd.run("validate", "--job", str(GOLDEN / "launch" / "slurm-hybrid-2x4gpu.sbatch"), "--json",
                   str(clean)).returncode == 0
    report = json.loads(clean.read_text())
    jsonschema.Draft202012Validator(schema).validate(report)
    assert report["job"]["kind"] == "Slurm batch script" and [r["id"] for r in report["results"]] == rules_for(
        SBATCH_KIND)
    # the hybrid script has no pyxis step: those rules had nothing to judge (SKIP, never a PASS they did not observe)
    assert {r["id"]: (r["status"], r["diagnosis"]) for r in report["results"] if r["status"] != "PASS"} == {
        "job.pmix": ("SKIP", "NOT_APPLICABLE"), "job.pyxis_image": ("SKIP", "NOT_APPLICABLE")}
    assert all(r["measured"].startswith(str(GOLDEN)) or r["measured"].startswith("NCCL_DEBUG=INFO")
               for r in report["results"] if r["status"] == "PASS"), report["results"]


def test_the_json_option_is_checked_before_the_job_is_judged(tmp_path):
    result = cmd.run("validate", "--job", str(GOLDEN / MPIJOB), "--json", str(tmp_path / "missing" / "r.json"))
    assert result.returncode == 2 and "--json" in result.stderr


def test_run_as_root_by_the_environment_alone_fails_where_the_images_open_mpi_ignores_it(tmp_path):
    """The launcher of our MPIJob golden (cpu stack, Open MPI 4.1.4) with the option replaced by the environment
    form passes; the same launcher on the NGC 19.06 image (Open MPI 3.1.3, Table 1) fails: its mpirun honours the
    variables only from Open MPI 4.0.2 (facts.openmpi)."""
    env = ("            env:\n            - name: OMPI_ALLOW_RUN_AS_ROOT\n              value: '1'\n"
           "            - name: OMPI_ALLOW_RUN_AS_ROOT_CONFIRM\n              value: '1'\n")
    text = (GOLDEN / MPIJOB).read_text().replace("            - --allow-run-as-root\n", "", 1)
    launcher = text.index("name: launcher")
    at = text.index("            command:\n", launcher)
    text = text[:at] + env + text[at:]
    ours = tmp_path / "env-form.yaml"
    ours.write_text(text)
    assert judge_job(str(ours))[1] == []
    image = next(line.split("image: ")[1] for line in text[launcher - 200:].splitlines() if "image: " in line)
    ngc = tmp_path / "ngc.yaml"
    ngc.write_text(text.replace(image, "nvcr.io/nvidia/tensorflow:19.06-py3"))
    findings = judge_job(str(ngc))[1]
    assert [(f.rule, f.code, f.status) for f in findings] == [("job.run_as_root", "MPI_RUN_AS_ROOT", "FAIL")]
    assert "stack ngc's, whose Open MPI 3.1.3 ignores them (honoured from Open MPI 4.0.2)" in findings[0].message
    assert "--allow-run-as-root" in findings[0].remedy


# --- the image pyxis runs: a squashfs by a path it reads as a file, never a SIF (case 29) --------------------------
PYXIS = "launch/slurm-pyxis-2x4gpu.sbatch"
PYXIS_IMAGE = "'--container-image=registry.example.com:5000#chexstack/cpu:0.1.0-0123456789ab'"


@pytest.mark.parametrize("image,written,code", [
    ("chexstack-ngc.sqsh", "--container-image=chexstack-ngc.sqsh", "PYXIS_SQUASHFS_AS_REGISTRY"),
    ("chexstack-ngc.sqsh", "--container-image chexstack-ngc.sqsh", "PYXIS_SQUASHFS_AS_REGISTRY"),
    ("chexstack-ngc.squashfs", "--container-image=chexstack-ngc.squashfs", "PYXIS_SQUASHFS_AS_REGISTRY"),
    ("images/chexstack-ngc.sqfs", "--container-image images/chexstack-ngc.sqfs", "PYXIS_SQUASHFS_AS_REGISTRY"),
    ("/shared/images/chexstack-ngc.sif", "--container-image=/shared/images/chexstack-ngc.sif", "PYXIS_SIF_IMAGE"),
    ("chexstack-ngc.sif", "'--container-image=chexstack-ngc.sif'", "PYXIS_SIF_IMAGE"),
])
def test_a_pyxis_image_pyxis_misreads_fails_on_its_line(tmp_path, image, written, code):
    """Case 29: pyxis takes an image as a file only when it starts with / or . (NVIDIA/pyxis#127), and runs no SIF;
    the rule is launch.slurm.enroot_uri's (facts.pyxis), the remedy the one --explain gives (launch.failure)."""
    path, text = _variant(tmp_path, PYXIS, PYXIS_IMAGE, written)
    _, findings = judge_job(str(path))
    assert [(f.rule, f.code, f.status, f.line) for f in findings] == [
        ("job.pyxis_image", code, "FAIL", _line_of(text, written))]
    assert findings[0].remedy == pyxis_remedy(code, image) and image in findings[0].message
    assert ("/shared/images/" in findings[0].remedy and "./%s" % image in findings[0].remedy
            if code == "PYXIS_SQUASHFS_AS_REGISTRY" else "--hybrid" in findings[0].remedy)


@pytest.mark.parametrize("written", ["--container-image=/shared/images/chexstack-ngc.sqsh",
                                     "--container-image ./chexstack-ngc.squashfs",
                                     "--container-image=../images/chexstack-ngc.sqfs",
                                     "--container-image=nvcr.io#nvidia/tensorflow:19.06-py3"])
def test_a_pyxis_image_pyxis_reads_as_meant_passes(tmp_path, written):
    path, _ = _variant(tmp_path, PYXIS, PYXIS_IMAGE, written)
    assert judge_job(str(path))[1] == []


def test_a_pyxis_image_directive_is_judged_too(tmp_path):
    path, text = _variant(tmp_path, PYXIS, "#SBATCH --exclusive\n",
                          "#SBATCH --exclusive\n#SBATCH --container-image=chexstack-ngc.sqsh\n")
    _, findings = judge_job(str(path))
    assert [(f.code, f.line) for f in findings] == [("PYXIS_SQUASHFS_AS_REGISTRY",
                                                     _line_of(text, "#SBATCH --container-image"))]
    result = cmd.run("validate", "--job", str(path))
    assert result.returncode == 1 and "FAIL PYXIS_SQUASHFS_AS_REGISTRY" in result.stdout


# --- IPC_LOCK with an RDMA device, whatever its device plugin names it; a privileged worker holds it (case 05) -----
_CAPS = ("            securityContext:\n              capabilities:\n                add:\n"
         "                - IPC_LOCK\n")
_RDMA = "rdma/hca_shared_devices_a: 1"


@pytest.mark.parametrize("context", [
    "            securityContext:\n              privileged: true\n",
    "            securityContext:\n              capabilities:\n                add:\n                - CAP_IPC_LOCK\n",
    "            securityContext:\n              capabilities:\n                add: [ALL]\n",
], ids=["privileged", "cap-prefix", "all"])
def test_a_worker_holding_ipc_lock_otherwise_passes(tmp_path, context):
    """The reviewer's MPIJob: a privileged worker with rdma/… has every capability; no false FAIL."""
    path, _ = _variant(tmp_path, MPIJOB, _CAPS, context)
    assert judge_job(str(path))[1] == []


@pytest.mark.parametrize("resource", ["mellanox.com/mlnx_sriov_rdma", "mellanox.com/mlnx_sriov_rdma_ib",
                                      "nvidia.com/rdma_shared_device_a", "example.com/hca_shared_devices_b",
                                      "rdma/vhca", "intel.com/intel_sriov_rdma"])
def test_an_rdma_resource_of_any_device_plugin_needs_ipc_lock(tmp_path, resource):
    """Case 05's remedy for an MPIJob: the RDMA device-plugin resource and IPC_LOCK. Resources not under rdma/ (the
    SR-IOV device plugin's, the NVIDIA Network Operator's) were missed (launch.k8s.RDMA_RESOURCES)."""
    text = (GOLDEN / MPIJOB).read_text().replace(_CAPS, "").replace(_RDMA, "%s: 1" % resource)
    path = tmp_path / "job.yaml"
    path.write_text(text)
    _, findings = judge_job(str(path))
    assert [(f.rule, f.code, f.status, f.line) for f in findings] == [
        ("job.ipc_lock", "NCCL_SOCKET_FALLBACK", "FAIL", _line_of(text, resource))]
    assert resource in findings[0].message and "IPC_LOCK" in findings[0].remedy
    path.write_text(text.replace("%s: 1" % resource, "%s: 1\n                example.com/fpga: 1" % resource)
                    .replace("          volumes:", _CAPS + "          volumes:", 1))
    assert judge_job(str(path))[1] == []


def test_a_resource_that_is_no_rdma_device_needs_nothing(tmp_path):
    for resource in ("nvidia.com/mig-1g.5gb", "example.com/fpga", "hugepages-2Mi"):
        text = (GOLDEN / MPIJOB).read_text().replace(_CAPS, "").replace(_RDMA, "%s: 1" % resource)
        path = tmp_path / "job.yaml"
        path.write_text(text)
        assert judge_job(str(path))[1] == [], resource
    assert all(is_rdma_resource(name) for name in ("rdma/hca_shared_devices_a", "RDMA/HCA", "mellanox.com/x"))
    assert all("https://" in source for _, source in RDMA_RESOURCES)  # each name pattern with its source


# --- a rule with nothing to judge is not checked (SKIP), never a PASS ("no violation") ----------------------------
def test_a_script_without_task_or_gpu_lines_passes_nothing_it_did_not_see(tmp_path):
    """New-user report: `#SBATCH --nodes=2` and `mpirun -np 4` got job.rank_per_gpu and job.slots PASS "no
    violation": there is no GPU to share and no task count to hold the ranks. Each is SKIP, saying why."""
    path = tmp_path / "nogpu.sbatch"
    path.write_text("#!/bin/bash\n#SBATCH --nodes=2\nexport NCCL_DEBUG=INFO\nmpirun -np 4 python -m trainer\n")
    out = tmp_path / "job.json"
    result = cmd.run("validate", "--job", str(path), "--json", str(out))
    assert result.returncode == 0, result.stderr
    by_id = {r["id"]: r for r in json.loads(out.read_text())["results"]}
    assert (by_id["job.rank_per_gpu"]["status"], by_id["job.rank_per_gpu"]["diagnosis"]) == ("SKIP", "NOT_APPLICABLE")
    assert by_id["job.rank_per_gpu"]["measured"].startswith("asks for no GPU")
    assert (by_id["job.slots"]["status"], by_id["job.slots"]["diagnosis"]) == ("SKIP", "JOB_LAYOUT_UNKNOWN")
    assert "mpirun -np 4 (line 4), but the script states no task count" in by_id["job.slots"]["measured"]
    assert by_id["job.nccl_debug"]["status"] == "PASS"
    assert {r["status"] for r in by_id.values()} == {"PASS", "SKIP"}
    assert "SKIP job.slots (not checked): mpirun -np 4 (line 4)" in result.stdout
    assert "0 FAIL, 0 WARN, 2 PASS, 6 not checked" in result.stdout
    assert "JOB_LAYOUT_UNKNOWN" in CODES


def test_an_mpijob_without_gpus_or_rdma_skips_those_rules():
    path = GOLDEN / "launch" / "mpijob-1x2cpu.yaml"
    results = {r.id: r for r in job_report(judge_file(str(path)), 0.0).results}
    assert {rid: r.diagnosis for rid, r in results.items() if r.status.value == "SKIP"} == {
        "job.rank_per_gpu": "NOT_APPLICABLE", "job.ipc_lock": "NOT_APPLICABLE", "job.run_as_root": "NOT_APPLICABLE"}
    assert results["job.shm"].status.value == "PASS" and "memory emptyDir of 2Gi" in results["job.shm"].measured


@pytest.mark.parametrize("resource,kind", [("bogus", "limits"), ("hca_shared_devices_a", "requests"),
                                           ("kubernetes.io/rdma", "limits")])
def test_a_resource_name_the_api_server_refuses_fails_on_its_line(tmp_path, resource, kind):
    """New-user report: `--rdma bogus` rendered `bogus: 1` into the workers' limits and --job passed it; the API
    server refuses a container resource without a domain that is no standard one ("must be a standard resource for
    containers"). The rule is launch.k8s.container_resource_problem, the renderer's."""
    text = (GOLDEN / MPIJOB).read_text().replace(_RDMA, "%s: 1" % resource)
    if kind == "requests":
        text = text.replace("limits:\n                nvidia.com/gpu", "requests:\n                nvidia.com/gpu")
    path = tmp_path / "job.yaml"
    path.write_text(text)
    _, findings = judge_job(str(path))
    assert [(f.rule, f.code, f.status, f.line) for f in findings] == [
        ("job.resource_names", "K8S_RESOURCE_NAME_INVALID", "FAIL", _line_of(text, "%s: 1" % resource))]
    assert "the worker's resources.%s name %s" % (kind, resource) in findings[0].message
    assert "DOMAIN/NAME" in findings[0].remedy and "extended-resource" in findings[0].remedy
    result = cmd.run("validate", "--job", str(path))
    assert result.returncode == 1 and "FAIL K8S_RESOURCE_NAME_INVALID" in result.stdout


# --- line breaks: sbatch refuses \r\n; YAML reads it as a break ----------------------------------------------------
def test_a_batch_script_with_dos_line_breaks_fails_on_its_first_such_line(tmp_path):
    """New-user report: a script saved on Windows got "0 FAIL, 0 WARN", and sbatch refuses it ("Batch script
    contains DOS line breaks (\\r\\n)"). The first \\r\\n line FAILs with dos2unix as the remedy; the other rules
    still judge the script (here its 8 tasks on 4 GPUs per node)."""
    text = ("#!/bin/bash\n#SBATCH --nodes 2\r\n#SBATCH --ntasks-per-node 8\r\n#SBATCH --gpus-per-node=4\r\n"
            "export NCCL_DEBUG=INFO\r\nsrun --mpi=pmix python -m trainer --data /data\r\n")
    path = tmp_path / "crlf.sbatch"
    path.write_bytes(text.encode())
    _, findings = judge_job(str(path))
    assert [(f.rule, f.code, f.status, f.line) for f in sorted(findings, key=lambda f: f.line)] == [
        ("job.line_endings", "JOB_DOS_LINE_BREAKS", "FAIL", 2), ("job.rank_per_gpu", "NCCL_DUPLICATE_GPU", "FAIL", 3)]
    dos = findings[0] if findings[0].rule == "job.line_endings" else findings[1]
    assert "5 of the script's lines" in dos.message and "Batch script contains DOS line breaks" in dos.message
    assert dos.remedy.startswith("dos2unix %s" % path)
    result = cmd.run("validate", "--job", str(path))
    assert result.returncode == 1 and "%s:2: FAIL JOB_DOS_LINE_BREAKS" % path in result.stdout
    path.write_bytes(text.replace("\r\n", "\n").replace("--ntasks-per-node 8", "--ntasks-per-node 4").encode())
    assert judge_job(str(path))[1] == []
    assert "job.line_endings" in judge_file(str(path)).checked


def test_an_mpijob_with_dos_line_breaks_is_read_as_yaml(tmp_path):
    """YAML takes \\r\\n as a line break (kubectl reads such a manifest): the MPIJob is judged, lines as written."""
    text = (GOLDEN / MPIJOB).read_text().replace("slotsPerWorker: 4", "slotsPerWorker: 8")
    path = tmp_path / "crlf.yaml"
    path.write_bytes(text.replace("\n", "\r\n").encode())
    kind, findings = judge_job(str(path))
    assert kind == "MPIJob"
    assert [(f.code, f.line) for f in findings] == [("NCCL_DUPLICATE_GPU", _line_of(text, "slotsPerWorker"))]


# --- one rank per GPU from every form Slurm takes ------------------------------------------------------------------
RANK_PER_GPU = [
    # (#SBATCH options, one per line, the launch line, (status, code) of job.rank_per_gpu, the line it names)
    (["-N 2", "-n 16", "--gres=gpu:v100:4"], None, ("FAIL", "NCCL_DUPLICATE_GPU"), "-n 16"),
    (["-N 2", "--ntasks-per-node=8", "-G 8"], None, ("FAIL", "NCCL_DUPLICATE_GPU"), "--ntasks-per-node=8"),
    (["--nodes=2", "--ntasks-per-node=8", "--gres=gpu:v100:4"], None, ("FAIL", "NCCL_DUPLICATE_GPU"),
     "--ntasks-per-node=8"),
    (["--nodes=2", "--ntasks=8", "--gres=gpu:4"], None, ("PASS", None), "--ntasks=8"),
    (["-N2", "-n8", "--gpus-per-node=v100:4"], None, ("PASS", None), "-n8"),
    (["--nodes 2 --ntasks-per-node 4", "--gpus=8"], None, ("PASS", None), "--nodes 2"),
    (["--nodes 2 --ntasks-per-node 4", "--gpus v100:10"], None, ("WARN", "JOB_GPUS_IDLE"), "--nodes 2"),
    (["--nodes 2 --ntasks-per-node 4", "--gpus v100:6"], None, ("FAIL", "NCCL_DUPLICATE_GPU"), "--nodes 2"),
    (["--ntasks-per-node=4", "--gpus-per-task=1"], None, ("PASS", None), "--gpus-per-task=1"),
    (["--ntasks-per-node=4", "--gpus-per-task=2"], None, ("WARN", "JOB_GPUS_IDLE"), "--gpus-per-task=2"),
    (["--ntasks-per-node=2", "--gres=gpu:4"], None, ("WARN", "JOB_GPUS_IDLE"), "--ntasks-per-node=2"),
    (["-N 2", "-n 7", "--gres=gpu:4"], None, ("PASS", None), "-n 7"),  # ceil(7 / 2) = 4 on one node
    (["-N 2", "-n 9", "--gres=gpu:4"], None, ("FAIL", "NCCL_DUPLICATE_GPU"), "-n 9"),  # at least 5 on one
    (["--ntasks-per-gpu=2", "-G 4"], None, ("FAIL", "NCCL_DUPLICATE_GPU"), "--ntasks-per-gpu=2"),
    (["--gres=gpu:tesla:2,nvme:1", "-N 1", "--ntasks-per-node=2"], None, ("PASS", None), "--ntasks-per-node=2"),
    (["--gres=gpu", "--ntasks-per-node=2"], None, ("FAIL", "NCCL_DUPLICATE_GPU"), "--ntasks-per-node=2"),
    (["--nodes=2-4", "--ntasks-per-node=4", "--gres=gpu:4"], None, ("PASS", None), "--ntasks-per-node=4"),
    # the steps' own options over the allocation's
    (["-N 2", "--gres=gpu:4"], "srun --mpi=pmix -n 16 --ntasks-per-node=8 python -m trainer",
     ("FAIL", "NCCL_DUPLICATE_GPU"), "srun"),
    (["-N 2", "--ntasks-per-node=4", "--gres=gpu:4"], "srun --mpi=pmix --ntasks-per-node=8 python -m trainer",
     ("FAIL", "NCCL_DUPLICATE_GPU"), "srun"),
    (["-N 2", "--ntasks-per-node=4", "--gpus-per-node=4"], "srun --mpi=pmix -N 1 -n 1 python -m trainer",
     ("PASS", None), "srun"),  # a step smaller than its allocation (a sweep's count): no idle warning
    (["-N 2", "--ntasks-per-node=4", "--gpus-per-node=4"], "srun --mpi=pmix -n 8 --gpus-per-task=1 python -m trainer",
     ("PASS", None), "srun"),
    (["-N 2", "--ntasks-per-node=8", "--gpus-per-node=4"], "srun --mpi=pmix python -m trainer -n 4",
     ("FAIL", "NCCL_DUPLICATE_GPU"), "--ntasks-per-node=8"),  # the program's -n is not srun's
]


@pytest.mark.parametrize("options,launch,verdict,marker", RANK_PER_GPU,
                         ids=["%d-%s" % (i, " ".join(c[0])) for i, c in enumerate(RANK_PER_GPU)])
def test_one_rank_per_gpu_in_every_form_slurm_takes(tmp_path, options, launch, verdict, marker):
    """New-user report: `-N 2 -n 16 --gres=gpu:v100:4` (8 ranks per node on 4 GPUs) and `-N 2 --ntasks-per-node=8 -G
    8` got 0 FAIL; only `--ntasks-per-node=8 --gres=gpu:v100:4` was caught. validate.slurmlayout reads every form."""
    text = "#!/bin/bash\n%s\nexport NCCL_DEBUG=INFO\n%s\n" % (
        "\n".join("#SBATCH %s" % o for o in options), launch or "srun --mpi=pmix python -m trainer")
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    result = rule_result("job.rank_per_gpu", judge_file(str(path)))
    assert (result.status.value, result.diagnosis) == verdict, result.measured
    assert result.measured.startswith("%s:%d: " % (path, _line_of(text, marker))), result.measured
    if verdict[0] == "FAIL":
        assert "Duplicate GPU detected" in result.measured and "--ntasks-per-node" in result.remedy


@pytest.mark.parametrize("options", [["-n 8", "--gres=gpu:4"], ["-N 2-4", "-n 16", "--gres=gpu:4"],
                                     ["--gres=gpu:4", "-n 4", "-N 1-2"]])
def test_gpus_without_a_derivable_layout_are_not_checked(tmp_path, options):
    """GPUs per node and a task count without the node count (or a range of nodes): how many ranks share a node's
    GPUs is Slurm's choice, so the rule is SKIP (JOB_LAYOUT_UNKNOWN), never PASS."""
    path = tmp_path / "job.sbatch"
    path.write_text("#!/bin/bash\n%s\nexport NCCL_DEBUG=INFO\nsrun --mpi=pmix python -m trainer\n"
                    % "\n".join("#SBATCH %s" % o for o in options))
    result = rule_result("job.rank_per_gpu", judge_file(str(path)))
    assert (result.status.value, result.diagnosis) == ("SKIP", "JOB_LAYOUT_UNKNOWN")
    assert "do not say how many tasks share a node's GPUs" in result.measured


def test_sbatch_reads_no_directive_after_the_first_command(tmp_path):
    """sbatch(1): #SBATCH lines after the first command are comments; the layout is the one before it."""
    path = tmp_path / "job.sbatch"
    path.write_text("#!/bin/bash\n#SBATCH -N 2\n#SBATCH --ntasks-per-node=4\n#SBATCH --gres=gpu:4\n"
                    "export NCCL_DEBUG=INFO\n#SBATCH --ntasks-per-node=8\nsrun --mpi=pmix python -m trainer\n")
    assert judge_job(str(path))[1] == []


@pytest.mark.parametrize("np_form", ["-np 16", "-np=16", "--np 16", "-n 16", "-c 16"])
def test_mpirun_slots_from_every_task_form(tmp_path, np_form):
    """Every spelling of mpirun's world size is read, ``-np=16`` too (fresh-user trial: it was taken for no -np)."""
    path = tmp_path / "job.sbatch"
    path.write_text("#!/bin/bash\n#SBATCH -N 2 -n 8\nexport NCCL_DEBUG=INFO\nmpirun %s python -m trainer\n" % np_form)
    _, findings = judge_job(str(path))
    assert [(f.code, f.line) for f in findings] == [("MPI_NOT_ENOUGH_SLOTS", 4)]
    assert "8 task slots (-n 8, line 2)" in findings[0].message


def test_an_mpijob_launcher_np_equals_form_is_read_on_its_line(tmp_path):
    path, changed = _variant(tmp_path, "launch/mpijob-2x4gpu-rdma.yaml", "- -np\n", "- -np=16\n")
    lines = changed.splitlines()
    k = next(i for i, line in enumerate(lines) if line.strip() == "- -np=16")
    del lines[k + 1]  # the value that followed -np
    path.write_text("\n".join(lines) + "\n")
    _, findings = judge_job(str(path))
    assert [(f.code, f.line) for f in findings] == [("MPI_NOT_ENOUGH_SLOTS", k + 1)]


def test_slurm_options_are_read_as_sbatch_and_srun_read_them():
    opts, program = read_options(["-N2", "-n", "16", "--gres", "gpu:v100:4", "-o", "out.txt", "--exclusive",
                                  "--gpus=a100:8", "python", "-n", "3"], 7)
    assert {k: (o.value, o.written) for k, o in opts.items()} == {
        "--nodes": ("2", "-N2"), "--ntasks": ("16", "-n 16"), "--gres": ("gpu:v100:4", "--gres gpu:v100:4"),
        "-o": ("out.txt", "-o out.txt"), "--exclusive": ("", "--exclusive"), "--gpus": ("a100:8", "--gpus=a100:8")}
    assert program == 9 and opts["--nodes"].line == 7
    assert [gres_gpus(v) for v in ("gpu:4", "gpu:v100:4", "gpu", "gpu:tesla", "nvme:1,gpu:2", "gres/gpu:3", "none",
                                   "gpu:v100:2(S:0-1)")] == [4, 4, 1, 1, 2, 3, None, 2]


@pytest.mark.parametrize("golden,old,new,gpus", [
    (MPIJOB, "- '8'\n", "- '12'\n", True),
    ("launch/slurm-hybrid-2x4gpu.sbatch", "mpirun -np 8 ", "mpirun -np 16 ", True),
    ("launch/slurm-baremetal-2x2cpu.sbatch", "mpirun --tag-output -np 4 ", "mpirun --tag-output -np 8 ", False),
])
def test_too_many_ranks_for_gpu_slots_is_fixed_by_fewer_ranks_not_oversubscription(tmp_path, golden, old, new, gpus):
    """New-user report: MPI_NOT_ENOUGH_SLOTS for a GPU MPIJob suggested --oversubscribe, against one rank per GPU;
    the remedy is launch.failure's for GPU ranks where the job asks for GPUs, its CPU one otherwise."""
    path, _ = _variant(tmp_path, golden, old, new)
    _, findings = judge_job(str(path))
    assert [f.code for f in findings] == ["MPI_NOT_ENOUGH_SLOTS"]
    assert findings[0].remedy == (GPU_LAUNCH_REMEDY if gpus else LAUNCH_REMEDY)["MPI_NOT_ENOUGH_SLOTS"]


# --- GPU binding against the trainer's local-rank pinning -----------------------------------------------------------
GPU_BINDING = [
    # (#SBATCH options, lines before the launch, the launch line, (status, code) of job.gpu_binding, the line it names)
    (["-N 2", "--ntasks-per-node=4", "--gpus-per-task=1"], [], None, ("FAIL", "JOB_GPU_BINDING"),
     "--gpus-per-task=1"),
    (["-N 2", "--ntasks-per-node=4", "--gpus-per-task=1", "--gpu-bind=none"], [], None, ("PASS", None),
     "--gpu-bind=none"),
    (["-N 2", "--ntasks-per-node=4", "--gpus-per-node=4"], [], None, ("PASS", None), "srun"),
    (["-N 2", "--ntasks-per-node=4", "--gres=gpu:4", "--gpu-bind=single:1"], [], None, ("FAIL", "JOB_GPU_BINDING"),
     "--gpu-bind=single:1"),
    (["-N 1", "--ntasks-per-node=4", "--gres=gpu:4"], [], "srun --mpi=pmix --gpu-bind=map_gpu:0,1,2,3 python -m "
     "trainer", ("FAIL", "JOB_GPU_BINDING"), "srun"),
    (["-N 1", "--ntasks-per-node=4", "--gres=gpu:4", "--gpu-bind=verbose,closest"], [], None,
     ("WARN", "JOB_GPU_BINDING"), "--gpu-bind=verbose,closest"),
    (["-N 1", "--ntasks-per-node=2", "--gres=gpu:4", "--gpu-bind=mask_gpu:0x3,0xc"], [], None, ("PASS", None),
     "--gpu-bind=mask_gpu"),
    (["-N 1", "--ntasks-per-node=4", "--gres=gpu:8", "--gpu-bind=per_task:2"], [], None, ("FAIL", "JOB_GPU_BINDING"),
     "--gpu-bind=per_task:2"),  # local ranks 2 and 3 see 2 GPUs each
    (["-N 1", "--ntasks-per-node=2", "--gres=gpu:8", "--gpu-bind=per_task:4"], [], None, ("PASS", None),
     "--gpu-bind=per_task:4"),
    (["-N 1", "--ntasks-per-node=4", "--gres=gpu:4", "--gpu-bind=per_task:1"], [], None,
     ("FAIL", "JOB_GPU_BINDING"), "--gpu-bind=per_task:1"),
    (["-N 4", "--ntasks-per-node=1", "--gpus-per-task=1"], [], None, ("PASS", None), "--gpus-per-task=1"),
    (["-N 2", "--gpus=8", "--gpus-per-task=1"], [], None, ("FAIL", "JOB_GPU_BINDING"), "--gpus-per-task=1"),
    (["-N 8", "--gpus=8", "--gpus-per-task=1"], [], None, ("PASS", None), "--gpus-per-task=1"),
    (["-N 2", "--ntasks-per-node=4", "--gpus-per-node=4"], [],
     "srun --mpi=pmix bash -c 'CUDA_VISIBLE_DEVICES=$SLURM_LOCALID python -m trainer'", ("FAIL", "JOB_GPU_BINDING"),
     "srun"),
    (["-N 1", "--ntasks-per-node=4", "--gres=gpu:4"], [],
     "srun --mpi=pmix env CUDA_VISIBLE_DEVICES=0 python -m trainer", ("FAIL", "JOB_GPU_BINDING"), "srun"),
    (["-N 1", "--ntasks-per-node=4", "--gres=gpu:4"], ["export CUDA_VISIBLE_DEVICES=0,1"], "mpirun -np 4 python -m "
     "trainer", ("FAIL", "JOB_GPU_BINDING"), "export CUDA_VISIBLE_DEVICES"),
    (["-N 1", "--ntasks-per-node=4", "--gres=gpu:4"], ["export CUDA_VISIBLE_DEVICES=0,1,2,3"], "mpirun -np 4 python "
     "-m trainer", ("PASS", None), "mpirun"),
    (["-N 1", "--ntasks-per-node=4", "--gres=gpu:4"], [], "srun --mpi=pmix env CUDA_VISIBLE_DEVICES= python -m "
     "trainer", ("WARN", "JOB_GPUS_IDLE"), "srun"),
    (["-N 1", "--ntasks-per-node=4", "--gres=gpu:4"], ["export CUDA_VISIBLE_DEVICES=$SLURM_LOCALID"], "mpirun -np 4 "
     "python -m trainer", ("FAIL", "JOB_GPU_BINDING"), "export CUDA_VISIBLE_DEVICES"),
    (["-N 1", "--ntasks-per-node=4", "--gres=gpu:4"], ["export CUDA_VISIBLE_DEVICES=0"], None,
     ("PASS", None), "srun"),  # Slurm sets the GPU step's own CUDA_VISIBLE_DEVICES
    (["-N 1", "--ntasks-per-node=4", "--gres=gpu:4"], ["export CUDA_VISIBLE_DEVICES=$MY_GPUS"], "mpirun -np 4 "
     "python -m trainer", ("WARN", "JOB_LAYOUT_UNKNOWN"), "export CUDA_VISIBLE_DEVICES"),  # never a PASS
    (["-N 1", "--ntasks-per-node=4", "--gres=gpu:4", "--gpus-per-task=1"], [], "mpirun -np 4 python -m trainer",
     ("SKIP", "JOB_LAYOUT_UNKNOWN"), None),
    (["-N 1", "--ntasks-per-node=4"], [], None, ("SKIP", "NOT_APPLICABLE"), None),
]


@pytest.mark.parametrize("options,before,launch,verdict,marker", GPU_BINDING,
                         ids=["%d-%s" % (i, " ".join(c[0][1:] + c[1])) for i, c in enumerate(GPU_BINDING)])
def test_gpu_binding_against_the_local_rank_pin(tmp_path, options, before, launch, verdict, marker):
    """Slurm binds GPUs per task (--gpus-per-task implies --gpu-bind=per_task:N; single, map_gpu, mask_gpu, closest;
    or a per-task CUDA_VISIBLE_DEVICES) while the trainer pins visible GPU hvd.local_rank(): local ranks 1..n-1 of a
    node then ask for a GPU their view does not have. A FAIL at the binding's line, with the fix."""
    text = "#!/bin/bash\n%s\nexport NCCL_DEBUG=INFO\n%s%s\n" % (
        "\n".join("#SBATCH %s" % o for o in options), "".join(line + "\n" for line in before),
        launch or "srun --mpi=pmix python -m trainer")
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    result = rule_result("job.gpu_binding", judge_file(str(path)))
    assert (result.status.value, result.diagnosis) == verdict, result.measured
    if marker:
        assert result.measured.startswith("%s:%d: " % (path, _line_of(text, marker))), result.measured
    if verdict == ("FAIL", "JOB_GPU_BINDING"):
        assert "hvd.local_rank()" in result.measured and "ask for a GPU index that does not exist" in \
            result.measured
        assert "--gpu-bind=none" in result.remedy and "--gpus-per-node=N" in result.remedy
        assert "https://slurm.schedmd.com/srun.html#OPT_gpu-bind" in result.remedy


def test_a_real_style_script_with_gpus_per_task_fails_at_its_line_through_the_entry(tmp_path):
    """A script written as cluster guides write them (one GPU per task, CUDA-aware MPI through srun): the entry prints
    the binding's FAIL at its line, with what the trainer does and the fix, and exits 1."""
    path = tmp_path / "train.sbatch"
    path.write_text("#!/bin/bash\n#SBATCH --job-name=chexnet\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n"
                    "#SBATCH --gpus-per-task=1\n#SBATCH --cpus-per-task=8\n#SBATCH --time=04:00:00\n\n"
                    "module load cuda/10.0 openmpi/4.0.0\nexport NCCL_DEBUG=INFO\n"
                    "srun --mpi=pmix python -m trainer --epochs 5\n")
    result = cmd.run("validate", "--job", str(path), env={"COLUMNS": "400"})
    assert result.returncode == 1, result.stdout + result.stderr
    line = next(x for x in result.stdout.splitlines() if "JOB_GPU_BINDING" in x)
    assert line.startswith("%s:5: FAIL JOB_GPU_BINDING: --gpus-per-task=1 (implicitly --gpu-bind=per_task:1): each "
                           "rank sees 1 GPU(s) of its own" % path), line
    assert "local ranks 1..3 ask for a GPU index that does not exist in their view" in line
    assert "local rank N has no GPU" in line
    assert "1 FAIL" in result.stdout.splitlines()[-1]


SLURM_DATA = REPO / "tests" / "data" / "slurm"


def test_mace_435_gpus_per_task_fails_where_local_ranks_1_to_7_see_one_gpu():
    """https://github.com/ACEsuit/mace/issues/435: 8 tasks on a node with --gpus-per-task=1; every rank but local rank
    0 failed with "invalid device ordinal" and --gpus-per-node was the fix. The rule names the line and that fix."""
    path = SLURM_DATA / "mace-435-gpus-per-task.sbatch"
    j = judge_file(str(path))
    binding = [f for f in j.findings if f.rule == "job.gpu_binding"]
    assert [(f.status, f.code, f.line) for f in binding] == [("FAIL", "JOB_GPU_BINDING", 8)]
    assert "local ranks 1..7 ask for a GPU index that does not exist in their view" in binding[0].message
    assert "--gpus-per-node=N" in binding[0].remedy
    assert rule_result("job.rank_per_gpu", j).status.value == "PASS"  # one GPU per rank: the count is right


def test_horovod_1755_style_gpu_bind_closest_is_a_warning():
    j = judge_file(str(SLURM_DATA / "horovod-1755-gpu-bind-closest.sbatch"))
    assert [(f.status, f.code, f.line) for f in j.findings] == [("WARN", "JOB_GPU_BINDING", 6)]


_SCRIPT = ("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n#SBATCH --gpus-per-node=4\n%s\n"
           "srun python -m trainer\n")


@pytest.mark.parametrize("line, written, why", [
    ("#SBATCH --gres=gpu:a100:x", "--gres=gpu:a100:x", "'gpu:a100:x': expected gpu[:TYPE][:N], N a whole number"),
    ("#SBATCH --gres=", "--gres=", "'': expected gpu[:TYPE][:N]"),
    ("#SBATCH --gpus-per-task=x", "--gpus-per-task=x", "'x': expected [TYPE:]N GPUs, N a whole number"),
    ("#SBATCH -G a100:two", "-G a100:two", "'a100:two': expected [TYPE:]N GPUs"),
    ("#SBATCH --ntasks-per-node=four", "--ntasks-per-node=four", "'four': expected a whole number of tasks per node"),
    ("#SBATCH -n 8x", "-n 8x", "'8x': expected a whole number of tasks"),
    ("#SBATCH -N", "-N", "no value: expected a node count N or a range MIN-MAX"),
    ("#SBATCH --nodes=two", "--nodes=two", "'two': expected a node count N or a range MIN-MAX"),
    ("#SBATCH --job-name='open", "#SBATCH --job-name='open", "No closing quotation"),
])
def test_a_value_sbatch_refuses_is_an_error_naming_line_and_option(tmp_path, line, written, why):
    """An ``#SBATCH`` value sbatch refuses is never read as "no GPU" or "no task count" (a SKIP): one ``error:
    --job FILE:LINE: OPTION: what sbatch expects`` line, exit 2."""
    path = tmp_path / "job.sbatch"
    path.write_text(_SCRIPT % line)
    result = cmd.run("validate", "--job", str(path), expect=2)
    assert result.stderr.startswith("error: --job %s:5: %s" % (path, written)), result.stderr
    assert why in result.stderr and "SKIP" not in result.stdout, result.stderr


def test_an_srun_step_value_srun_refuses_is_an_error_naming_its_line(tmp_path):
    path = tmp_path / "job.sbatch"
    path.write_text(_SCRIPT % "" + "srun --ntasks-per-node=x python -m trainer\n")
    result = cmd.run("validate", "--job", str(path), expect=2)
    assert result.stderr.startswith("error: --job %s:7: --ntasks-per-node=x: 'x': expected a whole number" % path)


@pytest.mark.parametrize("np, status", [(32, "FAIL"), (8, "PASS"), (12, "SKIP")])
def test_a_node_range_is_judged_at_its_ends(tmp_path, np, status):
    """``-N 2-4`` with ``--ntasks-per-node=4``: 8 to 16 slots. More ranks than the most nodes give is
    MPI_NOT_ENOUGH_SLOTS naming the range; within the fewest, a PASS; between, not checked, saying why."""
    path = tmp_path / "job.sbatch"
    path.write_text("#!/bin/bash\n#SBATCH -N 2-4\n#SBATCH --ntasks-per-node=4\n#SBATCH --gpus-per-node=4\n"
                    "mpirun -np %d python -m trainer\n" % np)
    result = cmd.run("validate", "--job", str(path), expect=1 if status == "FAIL" else 0)
    what = "mpirun -np %d in an allocation of 8 to 16 task slots (4 per node (--ntasks-per-node=4, line 3) × 2 to 4 " \
           "nodes (-N 2-4, line 2))" % np
    if status == "FAIL":
        assert "%s:5: FAIL MPI_NOT_ENOUGH_SLOTS: %s" % (path, what) in result.stdout, result.stdout
    elif status == "PASS":
        assert "SKIP job.slots" not in result.stdout and "FAIL" not in result.stdout.split("\n")[0]
        assert judge_file(str(path)).checked["job.slots"] == ["%s:5: %s" % (path, what)]
    else:
        assert "SKIP job.slots (not checked): mpirun -np 12 (line 5) in an allocation of 8 to 16 task slots" \
            in result.stdout and "state one node count" in result.stdout, result.stdout


def test_an_mpirun_np_that_is_no_number_is_an_error(tmp_path):
    """``mpirun -np two`` (a batch script's or an MPIJob launcher's) is refused naming the line, never read as no -np
    and a SKIP."""
    path = tmp_path / "job.sbatch"
    path.write_text(_SCRIPT.replace("srun python", "mpirun -np two python") % "")
    result = cmd.run("validate", "--job", str(path), expect=2)
    assert result.stderr.startswith("error: --job %s:6: mpirun -np 'two': expected a whole number of ranks" % path)
    job, text = _variant(tmp_path, MPIJOB, "- -np\n            - '8'", "- -np\n            - eight")
    result = cmd.run("validate", "--job", str(job), expect=2)
    assert result.stderr.startswith("error: --job %s:%d: mpirun -np 'eight'" % (job, _line_of(text, "command:")))

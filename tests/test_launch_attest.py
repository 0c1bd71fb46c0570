"""The signed statement of a result (launch.attest) and ``invoke verify-run``: a fresh run's statement verifies,
an edited metrics.json, a swapped SIF and a drifted environment fail by name, a missing statement or another key
cannot be verified; an implementation other than chexstack's (OpenSSL's ECDSA over DSSE's pre-authentication
encoding) accepts the same envelope. Drift itself (launch.drift) from as-run facts as the trainer records them."""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from envs.manifest import load_stack
from launch import attest
from launch.drift import drift
from tests.lib import lanes
from tests.lib.cli import run
from tests.lib.paths import REPO

#: One rank's as-run facts as trainer.asrun records them in the cpu image (Debian 12's Open MPI, CPU TensorFlow).
RANK = {"python": "3.11.2", "tensorflow": "2.15.1", "horovod": "0.28.1",
        "horovod_build": {"mpi": True, "gloo": True, "nccl": 0}, "nccl": None, "openmpi": "4.1.4",
        "packages": 52, "packages_sha256": "a" * 64}


@pytest.fixture
def key(tmp_path, monkeypatch):
    """A signing key of this test's own (the project's key is made in build/keys on first use)."""
    from images.sif import KEY_ENV, signing_key

    path = tmp_path / "keys" / "site.pem"
    monkeypatch.setattr("images.sif.DEFAULT_KEY", path)
    made = signing_key()
    monkeypatch.setenv(KEY_ENV, str(made))
    return made


def _result(folder, as_run=None, stack=None, image=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.json").write_text(json.dumps({"run": {"world_size": 2, "as_run": as_run or [RANK, RANK]},
                                                     "epochs": []}))
    (folder / "predictions.csv").write_text("image,Atelectasis\na.png,0.5\n")
    return attest.finish_run(folder, throughput=False, stack=stack, image=image, plan_line="horovodrun -np 2 x",
                             started=attest.now())


def test_drift_between_ranks_and_against_the_manifest():
    other = {**RANK, "tensorflow": "2.14.0", "packages_sha256": "b" * 64}
    assert drift([RANK, RANK], None) == []
    assert drift([RANK, other], None) == [
        "ranks disagree on tensorflow: rank 0 2.15.1, rank 1 2.14.0",
        "ranks disagree on packages_sha256: rank 0 %s, rank 1 %s" % ("a" * 64, "b" * 64)]
    assert drift([RANK], load_stack("cpu")) == []
    assert drift([{**RANK, "horovod": "0.28.0", "openmpi": None}], load_stack("cpu")) == [
        "horovod: stack cpu pins 0.28.1, the ranks run 0.28.0", "mpi: stack cpu pins 4.1.4, the ranks report none"]
    # a coarser fact than the pin is compared on the parts it gives (TensorFlow's build info: cuDNN "9")
    hopper = {**RANK, "python": "3.12.3", "tensorflow": "2.17.0", "openmpi": "4.1.7", "cuda": "12.8", "cudnn": "9",
              "nccl": "2.25.1"}
    assert drift([hopper], load_stack("hopper")) == []
    assert drift([{**hopper, "cudnn": "8"}], load_stack("hopper")) == ["cudnn: stack hopper pins 9.7.1, the ranks "
                                                                      "run 8"]
    assert drift(None, None) == ["the run record has no as-run facts (as_run): what the ranks imported was not "
                                 "observed"]


def test_a_fresh_statement_verifies_and_says_what_produced_the_result(tmp_path, key):
    found, path = _result(tmp_path / "out", stack="cpu")
    assert found == [] and path == tmp_path / "out" / attest.STATEMENT
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["run"]["drift"] == []
    stmt = attest.payload(json.loads(path.read_text()))
    assert stmt["_type"] == "https://in-toto.io/Statement/v1" and stmt["predicateType"] == attest.PREDICATE_TYPE
    assert [s["name"] for s in stmt["subject"]] == ["metrics.json", "predictions.csv"]
    assert stmt["predicate"]["stack"]["manifest_sha256"] == attest.sha256_file(REPO / "envs/stacks/cpu.yaml")
    result = run("verify-run", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "stack: cpu (manifest sha256 " in result.stdout and "launch: horovodrun -np 2 x" in result.stdout
    assert "as run (2 ranks): python 3.11.2, tensorflow 2.15.1, horovod 0.28.1, openmpi 4.1.4" in result.stdout


def test_an_edited_metrics_json_fails_naming_it(tmp_path, key):
    _result(tmp_path / "out")
    metrics = tmp_path / "out" / "metrics.json"
    metrics.write_text(metrics.read_text().replace('"world_size": 2', '"world_size": 4'))
    result = run("verify-run", str(tmp_path / "out"))
    assert result.returncode == 1
    assert "%s: SHA-256 " % metrics in result.stderr and "the statement says" in result.stderr


def test_a_swapped_sif_fails_naming_the_field(tmp_path, key):
    sif = tmp_path / "cpu.sif"
    sif.write_bytes(b"SIF one")
    _result(tmp_path / "out", image=attest.sif_block(sif))
    assert run("verify-run", str(tmp_path / "out")).returncode == 0
    sif.write_bytes(b"SIF two")
    result = run("verify-run", str(tmp_path / "out"))
    assert result.returncode == 1 and "image.sif_sha256: %s has SHA-256 " % sif in result.stderr


def test_a_drifted_environment_is_shown_and_fails_unless_allowed(tmp_path, key):
    found, _ = _result(tmp_path / "out", as_run=[RANK, {**RANK, "horovod": "0.28.0"}], stack="cpu")
    assert found == ["ranks disagree on horovod: rank 0 0.28.1, rank 1 0.28.0"]
    result = run("verify-run", str(tmp_path / "out"))
    assert result.returncode == 1 and "drift: the run's environment drifted (1 difference)" in result.stderr
    assert "drift: ranks disagree on horovod: rank 0 0.28.1, rank 1 0.28.0" in result.stdout
    assert run("verify-run", str(tmp_path / "out"), "--allow-drift").returncode == 0


def test_what_cannot_be_verified_exits_2(tmp_path, key):
    assert run("verify-run", str(tmp_path)).returncode == 2  # no statement
    _result(tmp_path / "out")
    other = tmp_path / "other.pem"
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    other.write_bytes(ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    result = run("verify-run", str(tmp_path / "out"), "--key", str(other))
    assert result.returncode == 2 and "signed by key " in result.stderr


def test_a_forged_payload_fails_the_signature(tmp_path, key):
    _, path = _result(tmp_path / "out")
    envelope = json.loads(path.read_text())
    stmt = attest.payload(envelope)
    stmt["predicate"]["git"]["commit"] = "0" * 40  # another commit claimed
    envelope["payload"] = base64.b64encode(json.dumps(stmt).encode()).decode()
    path.write_text(json.dumps(envelope))
    result = run("verify-run", str(tmp_path / "out"))
    assert result.returncode == 1 and "the signature does not match its payload" in result.stderr


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command (the second verifier)")
def test_openssl_verifies_the_same_envelope(tmp_path, key):
    """A second implementation: DSSE's PAE built from the spec (https://github.com/secure-systems-lab/dsse/blob/
    master/protocol.md) and OpenSSL's ECDSA P-256/SHA-256 check against the public key."""
    from images.sif import public_key

    _, path = _result(tmp_path / "out")
    envelope = json.loads(path.read_text())
    body = base64.b64decode(envelope["payload"])
    kind = envelope["payloadType"].encode()
    (tmp_path / "pae").write_bytes(b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body))
    (tmp_path / "sig").write_bytes(base64.b64decode(envelope["signatures"][0]["sig"]))
    argv = ["openssl", "dgst", "-sha256", "-verify", str(public_key(key)), "-signature", str(tmp_path / "sig"),
            str(tmp_path / "pae")]
    assert subprocess.run(argv, capture_output=True, text=True).stdout.strip() == "Verified OK"
    (tmp_path / "pae").write_bytes(b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body + b" "))
    assert subprocess.run(argv, capture_output=True, text=True).returncode == 1


# --- scheduled runs, judged hosts, bench-report --verify ------------------------------------------------------------

CPU_SWEEP = REPO / "tests" / "data" / "bench" / "cpu-sweep"  # real throughput.json files of the trainer
SCRIPT = "#!/bin/bash\n#SBATCH --nodes=2\nmpirun -np 2 python -m trainer --throughput\n"


def test_a_followed_slurm_job_is_signed_with_its_script_job_id_and_log(tmp_path, key):
    """What ``launch.run`` signs when a followed Slurm job ends: the job id from the follower's line in launch.log
    (the last: a resumed run's), the batch script kept as job.sbatch and the job's slurm-N.out among the subjects,
    the job block (script SHA-256, id) in the predicate; a changed script fails by name."""
    from launch.schedulers import SCHEDULERS

    out = tmp_path / "out"
    out.mkdir()
    (out / "launch.log").write_text("chexstack: submitted Slurm job 41; its output: %s/slurm-41.out\n"
                                    "chexstack: submitted Slurm job 42; its output: %s/slurm-42.out\n" % (out, out))
    (out / "slurm-42.out").write_text("epoch 1: loss 0.3\n")
    scheduler = SCHEDULERS["slurm-baremetal"]
    job_id, also = scheduler.followed(str(out), str(out / "launch.log"), SCRIPT)
    assert (job_id, also) == ("42", ("job.sbatch", "slurm-42.out")) and (out / "job.sbatch").read_text() == SCRIPT
    job = attest.job_block("slurm-baremetal", scheduler.artifact, SCRIPT, job_id)
    (out / "metrics.json").write_text(json.dumps({"run": {"as_run": [RANK, RANK]}, "epochs": []}))
    _, path = attest.finish_run(out, throughput=False, stack=None, image=None, plan_line="sbatch and follow",
                                started=attest.now(), jobs=[job], also=also)
    stmt = attest.payload(json.loads(path.read_text()))
    assert [s["name"] for s in stmt["subject"]] == ["metrics.json", "launch.log", "job.sbatch", "slurm-42.out"]
    assert stmt["predicate"]["jobs"] == [{"scheduler": "slurm-baremetal", "artifact": "batch script",
                                          "sha256": attest.sha256_file(out / "job.sbatch"), "id": "42"}]
    result = run("verify-run", str(out))
    assert result.returncode == 0, result.stderr
    assert "job: slurm-baremetal 42 (batch script sha256 %s)" % job["sha256"][:12] in result.stdout
    (out / "job.sbatch").write_text(SCRIPT.replace("-np 2", "-np 4"))
    result = run("verify-run", str(out))
    assert result.returncode == 1 and "%s: SHA-256 " % (out / "job.sbatch") in result.stderr


def test_a_collected_slurm_sweep_is_signed_with_the_job_kept_at_submission(tmp_path, key):
    """``invoke bench --collect`` signs the sweep JSON (beside it) and the results folder (every count's
    throughput.json, the job's record), both naming the job that ``invoke bench --submit`` kept; an edited count
    fails by name; a folder without the job's record is signed without a job, saying so."""
    folder = tmp_path / "results" / "cpu-batch-20240501T120000Z"
    shutil.copytree(CPU_SWEEP, folder)
    attest.keep_job(folder, attest.job_block("slurm-baremetal", "batch script", SCRIPT, "4242"))
    collected = run("bench", "--collect", str(folder), "--output", str(tmp_path / "sweeps"))
    assert collected.returncode == 0, collected.stderr
    sweep, = (tmp_path / "sweeps").glob("cpu-batch-*.json")
    for target in (attest.sweep_statement_path(sweep), folder):
        result = run("verify-run", str(target), "--allow-drift")  # these counts predate the as-run facts
        assert result.returncode == 0, result.stderr
        assert "job: slurm-baremetal 4242 (batch script sha256 " in result.stdout
    stmt = attest.payload(json.loads((folder / attest.STATEMENT).read_text()))
    assert [s["name"] for s in stmt["subject"]] == ["np-1/throughput.json", "np-2/throughput.json", "job.json"]
    counted = folder / "np-2" / "throughput.json"
    counted.write_text(counted.read_text().replace('"world_size": 2', '"world_size": 3'))
    result = run("verify-run", str(folder), "--allow-drift")
    assert result.returncode == 1 and "%s: SHA-256 " % counted in result.stderr
    (folder / attest.JOB_FILE).unlink()
    shutil.copy(CPU_SWEEP / "np-2" / "throughput.json", counted)
    collected = run("bench", "--collect", str(folder), "--output", str(tmp_path / "again"))
    assert collected.returncode == 0 and "holds no job.json" in collected.stderr, collected.stderr
    assert attest.payload(json.loads((folder / attest.STATEMENT).read_text()))["predicate"]["jobs"] == []


def test_a_collected_sweep_on_results_this_machine_cannot_write_is_still_signed(tmp_path, key):
    """Results on storage this machine only reads: the sweep JSON's statement is written, the results folder's is
    not (a warning naming why), and the collect succeeds."""
    from tests.lib.cli import INVOKE
    from tests.lib.readonly import run_with_read_only

    folder = tmp_path / "results" / "cpu-batch-20240501T120000Z"
    shutil.copytree(CPU_SWEEP, folder)
    ran = run_with_read_only(folder, [INVOKE, "bench", "--collect", str(folder), "--output", str(tmp_path / "s")])
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "the results folder's statement is not written: " in ran.stderr and "Read-only file system" in ran.stderr
    sweep, = (tmp_path / "s").glob("cpu-batch-*.json")
    assert attest.sweep_statement_path(sweep).is_file() and not (folder / attest.STATEMENT).exists()


def test_a_bench_sweep_submission_keeps_its_job_for_collect(tmp_path, monkeypatch):
    """``invoke bench --launcher slurm --submit``: the job id sbatch gives and the script's SHA-256 are kept in the
    sweep's results folder (``job.json``), which ``--collect`` signs."""
    fake = tmp_path / "bin" / "sbatch"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\ncat > %s/submitted.sbatch\necho 777\n" % tmp_path)
    fake.chmod(0o755)
    results = tmp_path / "results"
    submitted = run("bench", "--launcher", "slurm", "--submit", "--np", "1,2", "--results", str(results),
                    "--label", "kept", env={"PATH": "%s:/usr/bin:/bin" % fake.parent})
    assert submitted.returncode == 0, submitted.stderr
    folder, = results.glob("kept-*")
    job = attest.kept_job(folder)
    assert job == {"scheduler": "slurm-baremetal", "artifact": "batch script", "id": "777",
                   "sha256": attest.sha256_file(tmp_path / "submitted.sbatch")}


def test_a_job_not_followed_says_it_gets_no_statement(tmp_path):
    fake = tmp_path / "bin" / "sbatch"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\ncat > /dev/null\necho 55\n")
    fake.chmod(0o755)
    detached = run("train", "--launcher", "slurm", "--submit", "--detach", "--data", "synthetic", "--output",
                   str(tmp_path / "out"), env={"PATH": "%s:/usr/bin:/bin" % fake.parent})
    assert detached.returncode == 0, detached.stderr
    assert ("no signed statement: the batch script is not followed from here (--detach); invoke verify-run needs "
            "one") in detached.stdout
    assert not (tmp_path / "out" / attest.STATEMENT).exists()
    (fake.parent / "kubectl").write_text("#!/bin/sh\ncat > /dev/null\necho mpijob.kubeflow.org/x\n")
    (fake.parent / "kubectl").chmod(0o755)
    created = run("train", "--launcher", "k8s", "--stack", "cpu", "--submit", "--data", "synthetic", "--output",
                  "/shared/runs/k", env={"PATH": "%s:/usr/bin:/bin" % fake.parent})
    assert created.returncode == 0, created.stderr
    assert ("no signed statement: the MPIJob is not followed from here (this machine does not follow k8s jobs)"
            in created.stdout), created.stdout


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """A real evidence bundle of this node (``invoke validate --collect``, one check)."""
    folder = tmp_path_factory.mktemp("bundle") / "node"
    made = run("validate", "--only", "gpu.inventory", "--collect", str(folder))
    assert made.returncode == 0, made.stderr
    return folder


def test_judged_hosts_go_into_the_statement_and_a_changed_bundle_fails(tmp_path, key, bundle):
    """``--evidence DIR``: the bundle's host, verdict (a SKIP only: nothing judged, never a PASS) and SHA-256 in
    the predicate, printed by verify-run; a bundle edited afterwards fails by name."""
    from validate.verdict import judged

    evidence = tmp_path / "node"
    shutil.copytree(bundle, evidence)
    validation = judged([str(evidence)], False, str(tmp_path / "out"), None, 0)
    report = json.loads((evidence / "report.json").read_text())
    assert validation == [{"host": report["host"], "verdict": "SKIP", "exit_code": 0, "summary": report["summary"],
                           "evidence": str(evidence), "evidence_sha256": attest.tree_sha256(evidence)}]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "metrics.json").write_text(json.dumps({"run": {"as_run": [RANK]}, "epochs": []}))
    attest.finish_run(tmp_path / "out", throughput=False, stack=None, image=None, plan_line="x",
                      started=attest.now(), validation=validation)
    result = run("verify-run", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "validate: %s SKIP (exit 0; evidence %s sha256 " % (report["host"], evidence) in result.stdout
    (evidence / "report.json").write_text((evidence / "report.json").read_text().replace('"SKIP"', '"PASS"'))
    result = run("verify-run", str(tmp_path / "out"))
    assert result.returncode == 1 and "validation[0].evidence_sha256: %s (host " % evidence in result.stderr


def test_a_host_judged_unfit_stops_the_run_and_bad_evidence_is_named(tmp_path, bundle):
    from chexstack.errors import ChexstackError
    from validate.verdict import judged

    failed = tmp_path / "failed"
    shutil.copytree(bundle, failed)
    report = json.loads((failed / "report.json").read_text())
    report["exit_code"], report["results"][0]["status"] = 1, "FAIL"
    (failed / "report.json").write_text(json.dumps(report))
    with pytest.raises(ChexstackError, match=r"--evidence .*/failed: host \S+ judged FAIL \(gpu.inventory FAIL\): "
                                             "not starting the run on it") as e:
        judged([str(failed)], False, str(tmp_path / "out"), None, 0)
    assert e.value.exit_code == 1
    result = run("train", "--evidence", str(tmp_path / "nothing"), "--data", "synthetic")
    assert result.returncode == 2 and "--evidence %s: no such folder" % (tmp_path / "nothing") in result.stderr
    result = run("train", "--evidence", "", "--data", "synthetic")
    assert result.returncode == 2 and "--evidence '': expected bundle folders" in result.stderr
    result = run("train", "--validate", "--launcher", "slurm", "--render", "--output", "/shared/r1")
    assert result.returncode == 2 and "--validate judges this machine, not the run's nodes" in result.stderr


def _signed_sweep(folder, name="a.json", series="reference/seed-densenet121-baremetal.json"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    shutil.copy(REPO / "bench" / series, path)
    attest.write_collection(folder, [name], stack=None, image=None, drift=[], started=attest.now(), kind="sweep",
                            path=attest.sweep_statement_path(path))
    return path


def test_bench_report_verify_refuses_a_result_whose_statement_fails_or_is_missing(tmp_path, key):
    good = _signed_sweep(tmp_path / "s")
    other = _signed_sweep(tmp_path / "s", "b.json", "results/cpu-horovodrun-gloo-20261129T185204Z.json")
    figure = str(tmp_path / "fig" / "figure1.png")
    result = run("bench-report", "%s,%s" % (good, other), "--verify", "--output", figure)
    assert result.returncode == 0 and "verified: 2 signed results" in result.stdout, result.stderr
    other.write_text(other.read_text().replace("gloo", "Gloo", 1))
    unsigned = tmp_path / "c.json"
    shutil.copy(good, unsigned)
    result = run("bench-report", "%s,%s,%s" % (good, other, unsigned), "--verify", "--output", figure)
    assert result.returncode == 1, result.stdout
    assert "%s: %s: SHA-256 " % (other, other) in result.stderr
    assert "%s: no signed statement (c.intoto.jsonl or chexstack.intoto.jsonl beside it)" % unsigned in result.stderr
    assert str(good) + ":" not in result.stderr
    result = run("bench-report", str(good), "--verify", "--baseline", str(unsigned))
    assert result.returncode == 1 and "%s: no signed statement" % unsigned in result.stderr


#: Measured figures the README shows that predate the signed statements (2026-12-06): their per-count runs are not
#: in the repository, and a statement signed now would claim today's commit, key and time. The next `invoke study`
#: writes one (with signer.pub.pem) beside its figure: commit both, and its folder leaves this list.
BEFORE_STATEMENTS = {"bench/results/study-cpu-20261205T214235Z"}


def test_the_readmes_measured_figures_carry_their_statement():
    """Every result folder the README's figures come from holds a statement that ``invoke verify-run`` verifies with
    the public key committed beside it, or is one of the few measured before statements existed (and then holds
    none: the list cannot hide a statement that fails)."""
    import re

    folders = sorted({str(Path(m).parent) for m in re.findall(r"\((bench/results/[^)\s]+\.png)\)",
                                                             (REPO / "README.md").read_text())})
    assert folders, "the README shows no measured figure"
    for folder in folders:
        statement = REPO / folder / attest.STATEMENT
        if folder in BEFORE_STATEMENTS:
            assert not statement.exists(), "%s has a statement now: take it off BEFORE_STATEMENTS" % folder
            continue
        result = run("verify-run", str(REPO / folder), "--key", str(REPO / folder / attest.SIGNER))
        assert result.returncode == 0, result.stdout + result.stderr


def _cosign() -> str | None:
    """cosign on PATH, else the one scripts/setup-cosign unpacked."""
    here = REPO / "build" / "tools" / "cosign"
    return shutil.which("cosign") or (str(here) if here.is_file() else None)


def test_cosign_verifies_the_same_statement_and_refuses_an_edited_subject(tmp_path, key):
    """A third implementation, Sigstore's: ``cosign verify-blob-attestation --key`` (offline: no transparency log)
    checks the DSSE signature over the envelope's payload and the subject's SHA-256 against the file. cosign 3 reads
    the envelope from a Sigstore bundle (v0.3, https://github.com/sigstore/protobuf-specs/blob/main/protos/
    sigstore_bundle.proto): the test puts our envelope's payload, payloadType and signature in one unchanged, the
    signature's keyid left out (cosign 3.1.1 matches it against its own key's, empty for --key: observed here)."""
    binary = _cosign()
    if binary is None:
        lanes.unavailable("needs cosign (scripts/setup-cosign, run by scripts/setup --apptainer)")
    from images.sif import public_key

    _, path = _result(tmp_path / "out")
    envelope = json.loads(path.read_text())
    bundle = tmp_path / "statement.sigstore.json"
    bundle.write_text(json.dumps({
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {"publicKey": {"hint": envelope["signatures"][0]["keyid"]}},
        "dsseEnvelope": {"payload": envelope["payload"], "payloadType": envelope["payloadType"],
                         "signatures": [{"sig": envelope["signatures"][0]["sig"]}]}}))

    def cosign(subject):
        return subprocess.run([binary, "verify-blob-attestation", "--bundle", str(bundle), "--key",
                               str(public_key(key)), "--insecure-ignore-tlog", "--type", attest.PREDICATE_TYPE,
                               str(subject)], capture_output=True, text=True, timeout=120)

    for name in ("metrics.json", "predictions.csv"):
        verified = cosign(tmp_path / "out" / name)
        assert verified.returncode == 0 and "Verified OK" in verified.stdout + verified.stderr, verified.stderr
    metrics = tmp_path / "out" / "metrics.json"
    metrics.write_text(metrics.read_text().replace('"world_size": 2', '"world_size": 4'))
    refused = cosign(metrics)
    assert refused.returncode != 0 and "digests do not match" in refused.stderr, refused.stderr

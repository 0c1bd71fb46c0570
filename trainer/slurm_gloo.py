"""``python -m trainer.slurm_gloo --ranks-per-node K [TRAINER OPTIONS]``: one node's share of a Horovod job whose
ranks find each other through Slurm's task environment and Horovod's Gloo controller, for Slurm's own OCI
containers (``srun --container``).

Why not PMIx or PMI2: Slurm 22.05 runs a container step with one task per node only (slurmstepd's
``_modify_config`` refuses more: "unexpected number of tasks 2 > 1", src/slurmd/slurmstepd/container.c), so Slurm
cannot start one task per rank, and Slurm's PMI plugins serve tasks. This module is that one task per node: it
starts the node's K ranks (``python -m trainer`` with the options given) with Horovod's Gloo environment, the same
variables ``horovodrun`` gives a Gloo rank (horovod/runner/gloo_run.py, ``create_run_env_vars``,
``_slot_info_to_command_fn``), computed from Slurm's:

- rank = node index × K + local rank, the node index this host's place in ``SLURM_STEP_NODELIST``;
  size = nodes × K (``SLURM_STEP_NUM_NODES``, else ``SLURM_NNODES``);
  cross rank/size = node index/nodes; local size K (https://slurm.schedmd.com/srun.html, "OUTPUT ENVIRONMENT
  VARIABLES");
- the rendezvous: node 0's process serves Horovod's HTTP key-value store (``RendezvousHTTPServer``, as horovodrun
  does) at srun's address (``LAUNCH_ADDRESS``: where srun ran: the batch script's node, the step's first node) on port
  ``rendezvous_port`` (from the job and step ids); ``HOROVOD_GLOO_IFACE`` is the interface holding this node's
  address towards it.

Each rank's lines are prefixed ``[RANK]<stdout>:`` / ``[RANK]<stderr>:`` as horovodrun's Gloo ranks' are. Exit
status: the first failing rank's (the others are stopped), 0 when every rank ends 0, 2 for a missing Slurm
variable or a node 0 that is not where srun ran. SIGTERM/SIGINT are passed on to the ranks.
Python 3.5 syntax: it runs in the images.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from trainer.cli import OCI_ENV

#: Slurm's variables this needs (srun(1) "OUTPUT ENVIRONMENT VARIABLES"). Not ``SLURM_NODEID``: slurmstepd gives a
#: container the step's environment, not the task's, so the node's own variables are the batch script's (every
#: node saw ``SLURM_NODEID=0``, observed on the test cluster): the node index is this host's place in the step's
#: node list.
NEEDED = ("SLURM_STEP_NODELIST", "SLURM_JOB_ID")
#: Where srun runs, the rendezvous address: the first of these that is set. Slurm 22.05 gives a container step's
#: task ``SLURM_SRUN_COMM_HOST`` (srun's address, as its PMI plugins use it) but not ``SLURM_LAUNCH_NODE_IPADDR``
#: (observed on the test cluster).
LAUNCH_ADDRESS = ("SLURM_LAUNCH_NODE_IPADDR", "SLURM_SRUN_COMM_HOST")
PORT_BASE = 20000
#: What the run record says of how the ranks found each other (``trainer.runtime.container``'s ``rendezvous``).
RENDEZVOUS_ENV = dict(OCI_ENV)["rendezvous"]
RENDEZVOUS = "gloo from Slurm's task environment (trainer.slurm_gloo)"


class SlurmEnvError(Exception):
    """A Slurm variable missing or malformed, or a node layout this cannot serve."""


def rendezvous_port(job_id, step_id):
    """The rendezvous port of a job step: ``PORT_BASE`` + (job id mod 2000) × 8 + step id mod 8, so the steps of
    one job (a sweep) and jobs that follow each other do not meet on one port."""
    return PORT_BASE + (int(job_id) % 2000) * 8 + int(step_id) % 8


def expand_hostlist(text):
    """Slurm's compressed host list -> names: ``chex[1-2],gpu[08-10,12],login`` -> chex1, chex2, gpu08, gpu09,
    gpu10, gpu12, login (ranges keep their zero padding; scontrol(1) "show hostnames")."""
    names = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", text):
        match = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", part)
        if not match:
            names.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            first, _, last = item.partition("-")
            for n in range(int(first), int(last or first) + 1):
                for rest in expand_hostlist(suffix) if "[" in suffix else [suffix]:
                    names.append("%s%0*d%s" % (prefix, len(first), n, rest))
    return names


def layout(environ, ranks_per_node, hostname=None):
    """(node index, nodes, rendezvous address, port) from Slurm's variables in ``environ``: the node index is
    ``hostname``'s (default this host's short name) place in ``SLURM_STEP_NODELIST``. SlurmEnvError naming what is
    missing, or a host not in the list."""
    missing = [name for name in NEEDED if not environ.get(name)]
    nodes = environ.get("SLURM_STEP_NUM_NODES") or environ.get("SLURM_NNODES")
    if not nodes:
        missing.append("SLURM_STEP_NUM_NODES")
    address = next((environ[name] for name in LAUNCH_ADDRESS if environ.get(name)), None)
    if not address:
        missing.append(" or ".join(LAUNCH_ADDRESS))
    if missing:
        raise SlurmEnvError("Slurm variable(s) %s not set: run this under srun (one task per node)"
                            % ", ".join(missing))
    if ranks_per_node < 1:
        raise SlurmEnvError("--ranks-per-node %d: expected 1 or more" % ranks_per_node)
    try:
        nodes = int(nodes)
        port = rendezvous_port(environ["SLURM_JOB_ID"], environ.get("SLURM_STEP_ID", "0"))
    except ValueError as e:
        raise SlurmEnvError("Slurm variables: expected numbers (%s)" % e)
    hosts = expand_hostlist(environ["SLURM_STEP_NODELIST"])
    name = (hostname or socket.gethostname()).split(".")[0]
    if name not in hosts or len(hosts) != nodes:
        raise SlurmEnvError("host %s: expected one of the step's %d nodes, SLURM_STEP_NODELIST=%s"
                            % (name, nodes, environ["SLURM_STEP_NODELIST"]))
    node = hosts.index(name)
    tasks = environ.get("SLURM_STEP_NUM_TASKS") or environ.get("SLURM_NTASKS")
    if tasks and int(tasks) != nodes:
        raise SlurmEnvError("%s tasks on %d nodes: this starts the ranks of a node itself, so srun must start one "
                            "task per node (--ntasks-per-node=1)" % (tasks, nodes))
    return node, nodes, address, port


def rank_env(node, nodes, local_rank, ranks_per_node, address, port, iface):
    """Horovod's Gloo variables of one rank (the names horovodrun sets). ``HOROVOD_HOSTNAME`` is ``node<i>``: Horovod
    only keys the local scope of its rendezvous with it."""
    return {
        "HOROVOD_HOSTNAME": "node%d" % node,
        "HOROVOD_RANK": str(node * ranks_per_node + local_rank),
        "HOROVOD_SIZE": str(nodes * ranks_per_node),
        "HOROVOD_LOCAL_RANK": str(local_rank),
        "HOROVOD_LOCAL_SIZE": str(ranks_per_node),
        "HOROVOD_CROSS_RANK": str(node),
        "HOROVOD_CROSS_SIZE": str(nodes),
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": address,
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_IFACE": iface,
        RENDEZVOUS_ENV: RENDEZVOUS,
    }


def interface_towards(address):
    """(name of this host's interface whose address routes to ``address``, that address); SlurmEnvError when none
    holds it."""
    import psutil  # a Horovod dependency

    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((address, 9))
        local = probe.getsockname()[0]
    finally:
        probe.close()
    for name, addrs in sorted(psutil.net_if_addrs().items()):
        if any(a.family == socket.AF_INET and a.address == local for a in addrs):
            return name, local
    raise SlurmEnvError("no interface of this host holds %s, its address towards %s" % (local, address))


def serve_rendezvous(port, nodes, ranks_per_node):
    """Horovod's rendezvous server (its HTTP key-value store, initialised with the job's slots as horovodrun does)
    on ``port`` of every address, in a daemon thread; returns the server."""
    from horovod.runner.common.util.hosts import SlotInfo
    from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

    server = RendezvousHTTPServer(("", port), RendezvousHandler, 0)
    size = nodes * ranks_per_node
    server.init([SlotInfo("node%d" % n, n * ranks_per_node + k, k, n, size, ranks_per_node, nodes)
                 for n in range(nodes) for k in range(ranks_per_node)])
    thread = threading.Thread(target=server.serve_forever, name="rendezvous")
    thread.daemon = True
    thread.start()
    return server


def _relay(stream, rank, kind, out):
    for raw in iter(stream.readline, b""):
        out.write("[%d]<%s>:%s" % (rank, kind, raw.decode("utf-8", "replace")))
        out.flush()
    stream.close()


def run_ranks(argv, node, nodes, ranks_per_node, address, port, iface):
    """Start this node's ranks (``python -m trainer ARGV``), relay their lines, wait; the exit status (module
    docstring)."""
    ranks = []
    for local in range(ranks_per_node):
        env = dict(os.environ)
        env.update(rank_env(node, nodes, local, ranks_per_node, address, port, iface))
        rank = node * ranks_per_node + local
        p = subprocess.Popen([sys.executable, "-m", "trainer"] + list(argv), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        for stream, kind, out in ((p.stdout, "stdout", sys.stdout), (p.stderr, "stderr", sys.stderr)):
            t = threading.Thread(target=_relay, args=(stream, rank, kind, out))
            t.daemon = True
            t.start()
        ranks.append(p)

    def forward(signum, frame):
        for q in ranks:
            if q.poll() is None:
                q.send_signal(signum)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    status = 0
    while any(p.poll() is None for p in ranks):
        failed = [p.returncode for p in ranks if p.returncode not in (None, 0)]
        if failed and not status:
            status = failed[0]
            for p in ranks:
                if p.poll() is None:
                    p.terminate()
        time.sleep(0.2)
    codes = [p.returncode for p in ranks]
    failed = [c for c in codes if c != 0]
    if not status and failed:
        status = failed[0]
    time.sleep(0.3)  # let the relays write the last lines
    return 128 - status if status < 0 else status


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] != "--ranks-per-node":
        sys.stderr.write("usage: python -m trainer.slurm_gloo --ranks-per-node K [TRAINER OPTIONS]\n")
        return 2
    try:
        per_node = int(argv[1])
        node, nodes, address, port = layout(os.environ, per_node)
        iface, local = interface_towards(address)
        if node == 0 and local != address:
            raise SlurmEnvError("node 0 of the step has address %s, but srun ran at %s: "
                                "run srun from the allocation's first node (the batch script)" % (local, address))
        server = serve_rendezvous(port, nodes, per_node) if node == 0 else None
    except (SlurmEnvError, ValueError, OSError) as e:
        sys.stderr.write("trainer.slurm_gloo: error: %s\n" % e)
        return 2
    sys.stdout.write("trainer.slurm_gloo: node %d of %d, ranks %d-%d of %d, Gloo rendezvous %s:%d via %s\n" % (
        node, nodes, node * per_node, node * per_node + per_node - 1, nodes * per_node, address, port, iface))
    sys.stdout.flush()
    try:
        return run_ranks(argv[2:], node, nodes, per_node, address, port, iface)
    finally:
        if server is not None:
            server.shutdown()


if __name__ == "__main__":
    sys.exit(main())

"""What the cluster launchers need inside a stack image: the recipe part that provides it (``ssh_setup``) and the
in-image script that proves it (``CHECK_SCRIPT``, read by ``images.verify.launch_rows``).

Kubeflow's mpi-operator (MPIJob ``kubeflow.org/v2beta1``; facts from kubeflow/mpi-operator
``build/base/Dockerfile`` and ``pkg/controller/mpi_job_controller.go``):

- the Worker's container runs ``/usr/sbin/sshd -De`` (the operator's default command, also ours in
  ``launch/k8s.py``), as root when ``sshAuthMountPath`` is ``/root/.ssh``; sshd needs its privilege separation
  folder ``/var/run/sshd``, which no package creates outside systemd;
- the operator makes one ECDSA P-521 key per job (a ``kubernetes.io/ssh-auth`` Secret, PEM) and mounts it,
  read-only, at ``sshAuthMountPath`` as ``id_rsa``, ``id_rsa.pub`` and ``authorized_keys``, mode 0600 under
  ``/root/.ssh``. Its base image therefore sets, and so do we: sshd ``StrictModes no`` (the Secret's folder fails
  sshd's ownership and mode checks) and, for the client, ``StrictHostKeyChecking no`` (every pod is a new host)
  and ``UserKnownHostsFile /dev/null`` (``~/.ssh`` is read-only: no known_hosts can be written);
- the Launcher runs ``mpirun`` (on ``PATH``) with ``OMPI_MCA_plm_rsh_args=-o ConnectionAttempts=10``; the remote
  ``orted`` starts in a non-interactive ssh session, whose ``PATH`` is sshd's default, not the image's ``ENV``.

Host keys are made at build time (``ssh-keygen -A``, what Debian's openssh-server postinst does for the
operator's own Debian base; CentOS 7 makes them only in a systemd unit): the worker's command is plain ``sshd -De``
with no entrypoint that could make them at start, a read-only root filesystem could not store them, and the
clients check no host key (above), so a per-container key would authenticate nothing. Authentication is the
per-job client key.

Options are put at the top of ``/etc/ssh/sshd_config`` and ``/etc/ssh/ssh_config`` (both files: the first value
obtained wins; a global line before any ``Host``/``Match`` applies to every host). Not drop-in files:
``Include`` needs OpenSSH >= 7.3, and Ubuntu 16.04 (NGC 19.06) ships 7.2.

Also needed and checked: the verbs userspace for RDMA (``libibverbs.so.1`` plus at least one provider in
``/etc/libibverbs.d``; without a provider, libibverbs sees no HCA and NCCL silently uses TCP sockets), an Open MPI
with a PMIx component for pyxis (``srun --mpi=pmix``), and ``python -m trainer`` from ``/opt/chexstack``.
"""
from __future__ import annotations

import shlex
from collections.abc import Sequence

from hpccm.building_blocks import packages

from facts.openmpi import ALLOW_RUN_AS_ROOT_FLAG
from images.parts import Part, combine, run

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = "/var/run/sshd"
SSHD_CONFIG = "/etc/ssh/sshd_config"
SSH_CONFIG = "/etc/ssh/ssh_config"
#: (keyword, value) put first in sshd_config / ssh_config (mpi-operator build/base/Dockerfile).
SSHD_OPTIONS = (("StrictModes", "no"),)
SSH_CLIENT_OPTIONS = (("StrictHostKeyChecking", "no"), ("UserKnownHostsFile", "/dev/null"))
#: OpenSSH package names per package manager (hpccm's ``packages`` picks by the stage's distro).
APT_PACKAGES = ["openssh-client", "openssh-server"]
YUM_PACKAGES = ["openssh-clients", "openssh-server"]
#: The verbs userspace on Debian/Ubuntu: rdma-core's library and its providers (mlx4, mlx5, efa, ...). Debian's
#: ``rdma-core`` package itself holds udev rules and daemons a container does not run.
VERBS_APT_PACKAGES = ["ibverbs-providers", "libibverbs1"]

#: The name the in-image check gives a second sshd "host": an address of the loopback network that is not an
#: interface address, so Open MPI sees a remote node and starts its daemon over ssh.
CHECK_WORKER = "mpijob-worker"
CHECK_WORKER_ADDRESS = "127.0.0.2"


def _prepend(path: str, comment: str, options: tuple[tuple[str, str], ...]) -> str:
    """Shell: put ``comment`` and ``options`` before the first line of ``path``, keeping its mode and owner."""
    lines = " ".join(shlex.quote(s) for s in ["# chexstack (images/mpijob.py): " + comment]
                     + ["%s %s" % kv for kv in options])
    tmp = "%s.chexstack" % path
    return "printf '%%s\\n' %s | cat - %s > %s && cat %s > %s && rm -f %s" % (lines, path, tmp, tmp, path, tmp)


def ssh_setup(also: Sequence[str] = ()) -> Part:
    """OpenSSH server + client ready for an MPIJob (module docstring): packages, ``/var/run/sshd``, host keys,
    ``StrictModes no``, ``StrictHostKeyChecking no``, ``UserKnownHostsFile /dev/null``. ``also``: the stage's
    other distribution packages (names of its package manager), installed in the same layer."""
    return combine(
        "mpijob-ssh",
        Part("os-packages", [packages(apt=sorted({*APT_PACKAGES, *also}), yum=sorted({*YUM_PACKAGES, *also}))]),
        run("mkdir -p %s" % PRIVSEP_DIR,
            "ssh-keygen -A",
            _prepend(SSHD_CONFIG, "the MPIJob key is a read-only Secret mount", SSHD_OPTIONS),
            _prepend(SSH_CONFIG, "every MPIJob pod is a new host; ~/.ssh is a read-only Secret", SSH_CLIENT_OPTIONS),
            name="ssh-config"),
    )


# The in-image check (POSIX sh; Ubuntu 16.04, CentOS 7, Debian 12). Each section: "\036NAME\n", its output,
# "\037RC\n". The last section mirrors an MPIJob in one container: the operator's kind of key (ECDSA P-521, PEM,
# named id_rsa, files 0600 in a world-writable folder as a Secret volume is), sshd started as the Worker's command,
# and mpirun starting one rank on CHECK_WORKER through ssh (BatchMode: fail rather than prompt).
CHECK_SCRIPT = r"""
exec 2>&1
sec() { printf '\036%s\n' "$1"; }
rc() { printf '\037%s\n' "$1"; }
sec sshd; @SSHD@ -T; r=$?; [ -d @PRIVSEP@ ] || { echo "@PRIVSEP@: missing"; r=1; }; rc $r
sec ssh-client; ssh -G @WORKER@; rc $?
sec mpirun; command -v mpirun; rc $?
sec pmix; if command -v ompi_info > /dev/null; then ompi_info | grep -i -e 'Open MPI:' -e 'MCA pmix:'; rc $?
  else echo "ompi_info: not found"; rc 127; fi
sec verbs; ldconfig -p | grep -F 'libibverbs.so.1'; ls /etc/libibverbs.d; rc $?
sec trainer; (cd /opt/chexstack && python -m trainer --help) > /tmp/trainer-help; r=$?
  if [ $r = 0 ]; then grep -m 1 '^usage:' /tmp/trainer-help; else tail -n 5 /tmp/trainer-help; fi; rc $r
sec ssh-mpirun
mkdir -p /root/.ssh && chmod 1777 /root/.ssh && rm -f /root/.ssh/id_rsa /root/.ssh/id_rsa.pub &&
  ssh-keygen -q -t ecdsa -b 521 -m PEM -N '' -f /root/.ssh/id_rsa &&
  cp /root/.ssh/id_rsa.pub /root/.ssh/authorized_keys && chmod 0600 /root/.ssh/id_rsa* /root/.ssh/authorized_keys
r=$?
if [ $r = 0 ]; then
  @SSHD@ -De 2> /tmp/sshd.log &
  timeout 120 mpirun @ALLOW_ROOT@ -np 1 -H @WORKER@:1 -mca plm_rsh_args '-o BatchMode=yes -o ConnectionAttempts=10' \
    -mca pml ob1 -mca btl self sh -c 'echo "rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE, ssh $SSH_CONNECTION"'
  r=$?
  if [ $r != 0 ]; then echo '--- sshd log ---'; tail -n 10 /tmp/sshd.log; fi
fi
rc $r
""".replace("@ALLOW_ROOT@", ALLOW_RUN_AS_ROOT_FLAG).replace("@SSHD@", SSHD).replace("@PRIVSEP@", PRIVSEP_DIR) \
    .replace("@WORKER@", CHECK_WORKER)


def parse_report(text: str) -> dict[str, tuple[str, int | None]]:
    """``CHECK_SCRIPT``'s output -> ``{section: (output, exit status or None when cut off)}``."""
    sections = {}
    for chunk in text.split("\036")[1:]:
        name, _, body = chunk.partition("\n")
        out, sep, status = body.rpartition("\037")
        code = status.strip()
        sections[name.strip()] = (out if sep else body, int(code) if sep and code.lstrip("-").isdigit() else None)
    return sections

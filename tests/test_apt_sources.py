"""facts.apt_sources: debootstrap's mirror is the one this machine's apt sources name (deb822 and one-line
formats), never a URL written into the repository."""
from __future__ import annotations

import pytest

from facts import apt_sources as A

# The deb822 file of a Debian 12 machine (its /etc/apt/sources.list.d/debian.sources, comments as shipped).
DEBIAN_SOURCES = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""

SITE_LIST = """\
# a site's own mirror, one-line style
deb-src http://mirror.site.example/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] \
http://mirror.site.example/debian bookworm main contrib
deb http://mirror.site.example/debian-security bookworm-security main
"""


def test_a_deb822_file_names_the_main_archive_of_the_release():
    sources = A.parse_deb822(DEBIAN_SOURCES)
    assert [s.uris for s in sources] == [("http://deb.debian.org/debian",), ("http://deb.debian.org/debian-security",)]
    assert A.debian_mirror(sources, "bookworm") == "http://deb.debian.org/debian"


def test_a_one_line_list_with_options_and_a_deb_src_line_names_the_site_mirror():
    assert A.debian_mirror(A.parse_one_line(SITE_LIST), "bookworm") == "http://mirror.site.example/debian"


def test_a_disabled_or_other_release_source_is_not_the_mirror():
    disabled = DEBIAN_SOURCES.replace("Components: main\nSigned", "Enabled: no\nComponents: main\nSigned", 1)
    assert A.debian_mirror(A.parse_deb822(disabled), "bookworm") is None
    assert A.debian_mirror(A.parse_deb822(DEBIAN_SOURCES), "trixie") is None


def test_the_override_wins(monkeypatch):
    monkeypatch.setenv(A.OVERRIDE, "http://override.example/debian")
    assert A.debian_mirror(A.parse_deb822(DEBIAN_SOURCES), "bookworm") == "http://override.example/debian"


def test_files_are_read_in_apt_order_and_a_non_debian_host_has_no_codename(tmp_path, monkeypatch):
    monkeypatch.delenv(A.OVERRIDE, raising=False)
    (tmp_path / "a.list").write_text(SITE_LIST)
    (tmp_path / "b.sources").write_text(DEBIAN_SOURCES)
    found = A.read_sources((str(tmp_path / "*.list"), str(tmp_path / "*.sources")))
    assert A.debian_mirror(found, "bookworm") == "http://mirror.site.example/debian"
    os_release = tmp_path / "os-release"
    os_release.write_text('ID=ubuntu\nVERSION_CODENAME=noble\n')
    assert A.codename(str(os_release)) is None
    os_release.write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_CODENAME=bookworm\n')
    assert A.codename(str(os_release)) == "bookworm"


@pytest.mark.parametrize("path", ["images/local_base.py", "scripts/setup-apptainer", "scripts/setup"])
def test_no_mirror_url_is_written_into_the_code(path):
    from tests.lib.paths import REPO
    text = (REPO / path).read_text()
    assert "deb.debian.org" not in text and "http://" not in text.replace("https://github.com", "")

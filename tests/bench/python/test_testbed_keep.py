# The testbed's kept folders (tools/testbed/longhaul_testbed.py): which host folders are
# carried over the guests' own /tmp and /run, and the guest lines that carry them.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tools", "testbed"))
import longhaul_testbed as lt  # noqa: E402


# (The paths need not exist; none of these is a symbolic link on a Debian machine.)
def test_only_folders_under_the_guests_tmpfs_are_kept():
    kept = lt._kept_folders(["/usr/lib", "/work/x", "/tmp/lh-x/checkout/build", "/run/lh-y"])
    assert kept == ["/run/lh-y", "/tmp/lh-x/checkout/build"]


def test_a_folder_inside_a_kept_one_is_not_kept_twice():
    assert lt._kept_folders(["/tmp/lh-x/c/build", "/tmp/lh-x/c", "/tmp/lh-x/c/"]) == ["/tmp/lh-x/c"]


def test_a_name_that_only_starts_like_tmp_is_not_kept():
    assert lt._kept_folders(["/tmpfoo/build", "/running"]) == []


def test_guest_lines_hold_each_folder_aside_and_move_it_back():
    aside, back = lt._keep_commands(["/tmp/a b", "/run/c"])
    assert aside.splitlines()[0].startswith("mkdir -p /.lh-keep/0 && mount --bind '/tmp/a b' /.lh-keep/0")
    assert "mount --bind /run/c /.lh-keep/1" in aside.splitlines()[1]
    assert back.splitlines()[0].startswith("mkdir -p '/tmp/a b' && mount --move /.lh-keep/0 '/tmp/a b'")
    assert "mount --move /.lh-keep/1 /run/c" in back.splitlines()[1]
    assert lt._keep_commands([]) == ("", "")


def test_the_guest_init_carries_them_around_its_tmpfs_mounts():
    text = lt.GUEST_INIT
    assert text.index("@KEEP_ASIDE@") < text.index("mount -t tmpfs tmpfs /tmp")
    assert text.index("mount -t tmpfs tmpfs /run") < text.index("@KEEP_BACK@")

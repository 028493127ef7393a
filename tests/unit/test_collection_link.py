# SPDX-License-Identifier: Apache-2.0
"""The driver finds the collection and exposes it as an Ansible collections path."""

from __future__ import annotations

from gpufabric import collection


def test_checkout_is_linked_under_the_cache(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = collection.collections_path()
    link = path / "ansible_collections" / "gpufabric" / "cluster"
    assert path.is_relative_to(tmp_path)
    assert link.resolve() == repo
    assert collection.collections_path() == path, "stable across calls"


def test_stale_link_is_repointed(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    link = collection.collections_path() / "ansible_collections" / "gpufabric" / "cluster"
    link.unlink()
    link.symlink_to(tmp_path)
    collection.collections_path()
    assert link.resolve() == repo


def test_collection_already_in_a_collections_tree_is_used_in_place(tmp_path, monkeypatch):
    root = tmp_path / "ansible_collections" / "gpufabric" / "cluster"
    root.mkdir(parents=True)
    (root / "galaxy.yml").write_text("namespace: gpufabric\n", encoding="utf-8")
    monkeypatch.setattr(collection, "collection_root", lambda: root)
    assert collection.collections_path() == tmp_path

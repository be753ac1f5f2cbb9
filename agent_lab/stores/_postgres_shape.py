"""The shape of the PostgreSQL store's tables, checked when the store sets up (see `problem`).

``CREATE TABLE IF NOT EXISTS`` keeps a table that is already there, whatever it looks like: one made
beforehand by a schema tool or a DBA, restored by another program, or edited since. The statements
rely on more than the table's name: a tenant column under a case-insensitive (nondeterministic ICU)
collation, or of type citext, made tenant ``ACME`` replay tenant ``acme``'s receipt, and a trigger that
moved each new reservation aside let one key run twice (both reproduced). So a store refuses, when it
opens, tables that are not the shape it creates, as the SQLite store does (``sqlite._check_tables``).
One catalog query reads every table's facts (`sql`); `problem` judges them in Python.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = ["TableShape", "exists", "problem", "sql"]

TEXT, FLOAT = "text", "double precision"

TableShape = Tuple[Tuple[str, ...], Mapping[str, str]]
"""A table's primary key (its columns in order) and every column the statements use, with its type."""

_KINDS = {"p": "a partitioned table", "v": "a view", "m": "a materialized view", "f": "a foreign table"}


def sql(tables: Sequence[str]) -> str:
    """One statement answering rows of five texts, ``(table, fact, name, detail, more)``, for each of
    `tables` as the connection's ``search_path`` finds it (``to_regclass``, as the statements do):

    - ``table``: its qualified name (where it would be created, when there is none), its ``relkind``
      and ``relpersistence`` (NULL when there is none);
    - ``column``: each column, its type (``text`` or ``double precision`` when it is exactly that type,
      never a domain over it; otherwise as PostgreSQL prints it) and, for a collatable type, ``ok`` when
      it compares byte for byte (see `problem`), otherwise the collation's name;
    - ``primary key``: the constraint's name and its columns in order (``quote_ident``, comma-separated);
    - ``unique``, ``trigger``, ``rule``, ``child``: each unique or exclusion index beside the primary
      key, each trigger but PostgreSQL's internal ones (those of foreign keys), each rewrite rule, each
      table that inherits from it.
    """
    wanted = ", ".join(f"('{table}')" for table in tables)  # fixed names of the store's own
    return f"""WITH wanted (name) AS (VALUES {wanted}),
found AS (SELECT w.name, c.oid, c.relkind, c.relpersistence, n.nspname, c.relname
          FROM wanted w LEFT JOIN pg_catalog.pg_class c ON c.oid = pg_catalog.to_regclass(w.name)
          LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace)
SELECT f.name, 'table', COALESCE(pg_catalog.quote_ident(f.nspname) || '.' || pg_catalog.quote_ident(f.relname),
                                 pg_catalog.quote_ident(pg_catalog.current_schema()) || '.' || f.name, f.name),
       CAST(f.relkind AS text), CAST(f.relpersistence AS text) FROM found f
UNION ALL
SELECT f.name, 'column', CAST(a.attname AS text),
       CASE a.atttypid WHEN CAST('pg_catalog.text' AS pg_catalog.regtype) THEN '{TEXT}'
                       WHEN CAST('pg_catalog.float8' AS pg_catalog.regtype) THEN '{FLOAT}'
                       ELSE pg_catalog.format_type(a.atttypid, a.atttypmod) END,
       CASE WHEN co.oid IS NULL THEN NULL
            WHEN co.collnamespace = CAST('pg_catalog' AS pg_catalog.regnamespace)
                 AND co.collname IN ('default', 'C', 'POSIX') AND co.collisdeterministic THEN 'ok'
            ELSE pg_catalog.quote_ident(cn.nspname) || '.' || pg_catalog.quote_ident(co.collname)
                 || CASE WHEN co.collisdeterministic THEN '' ELSE ' (nondeterministic)' END END
FROM found f JOIN pg_catalog.pg_attribute a ON a.attrelid = f.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation
LEFT JOIN pg_catalog.pg_namespace cn ON cn.oid = co.collnamespace
UNION ALL
SELECT f.name, 'primary key', CAST(k.conname AS text),
       (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY p.ord)
        FROM pg_catalog.unnest(k.conkey) WITH ORDINALITY AS p (attnum, ord)
        JOIN pg_catalog.pg_attribute a ON a.attrelid = f.oid AND a.attnum = p.attnum), NULL
FROM found f JOIN pg_catalog.pg_constraint k ON k.conrelid = f.oid AND k.contype = 'p'
UNION ALL
SELECT f.name, 'unique', CAST(CAST(i.indexrelid AS pg_catalog.regclass) AS text), NULL, NULL
FROM found f JOIN pg_catalog.pg_index i ON i.indrelid = f.oid
WHERE (i.indisunique OR i.indisexclusion) AND NOT i.indisprimary
UNION ALL
SELECT f.name, 'trigger', CAST(t.tgname AS text), NULL, NULL
FROM found f JOIN pg_catalog.pg_trigger t ON t.tgrelid = f.oid AND NOT t.tgisinternal
UNION ALL
SELECT f.name, 'rule', CAST(r.rulename AS text), NULL, NULL
FROM found f JOIN pg_catalog.pg_rewrite r ON r.ev_class = f.oid
UNION ALL
SELECT f.name, 'child', CAST(CAST(h.inhrelid AS pg_catalog.regclass) AS text), NULL, NULL
FROM found f JOIN pg_catalog.pg_inherits h ON h.inhparent = f.oid"""


def exists(rows: Sequence[Sequence[Optional[str]]], table: str) -> bool:
    """Whether the answer of `sql` found `table`."""
    return any(row[0] == table and row[1] == "table" and row[3] is not None for row in rows)


def problem(rows: Sequence[Sequence[Optional[str]]], shapes: Mapping[str, TableShape], *,
            optional: Sequence[str] = ()) -> str:
    """What keeps the tables the answer of `sql` describes from being used as the store's, or "": the
    first problem found, naming the table. A column named in `optional` may be missing (a database of
    schema version 1, whose migration adds it); when there, it is checked like the others.

    Every column the statements use must be there with its type, exactly (``text``, not ``citext``,
    ``varchar`` or a domain; ``double precision``, not ``real``, which rounds an expiry to about a
    minute either way). Every ``text`` column, not only the key's (the statements compare owner tokens,
    fingerprints, records and states with ``=`` too), must compare byte for byte: under the collation
    ``"C"`` or ``"POSIX"`` (the store's own; they compare and order bytes, whatever the server's
    locale or library versions) or the database default (what a column made without ``COLLATE``
    gets; PostgreSQL allows only a deterministic one), and deterministic. A deterministic collation
    calls two texts equal only when their bytes are; a nondeterministic one may call ``ACME`` and
    ``acme`` equal, in the primary key and in ``tenant = $1`` alike. Other collations are refused even
    when deterministic (their equality is as exact): the store never makes them, and one of ICU or the
    C library orders by rules that a library upgrade may change under the primary key's index; the
    default may too, but it is what a table made by hand gets.
    The primary key must be the store's columns in that order (PostgreSQL builds it with the columns'
    collations and default operator classes, refusing any other), and there must be no other unique or
    exclusion index (an ``ON CONFLICT (tenant, tool, key)`` also takes one under another collation as
    its arbiter, and a conflict on any other fails: one tenant's key then kept another's from being
    reserved, reproduced), no trigger and no rule (either may change or move what a statement writes:
    a trigger moving each new reservation aside ran one key twice, reproduced), no child table
    (whose rows the statements would read and change beside the table's), and the table must be an
    ordinary one that is logged (an ``UNLOGGED`` table is emptied by a server crash, and every key
    whose receipt it held could run again)."""
    facts: Dict[str, Dict[str, List[Tuple[Optional[str], Optional[str], Optional[str]]]]] = {}
    for table, fact, name, detail, more in rows:
        facts.setdefault(str(table), {}).setdefault(str(fact), []).append((name, detail, more))
    for table, (primary_key, columns) in shapes.items():
        found = facts.get(table, {})
        what = _table_problem(found, primary_key, columns, optional)
        if what:
            described = found.get("table", [(None, None, None)])[0][0] or table
            return f"table {described!r}: {what}"
    return ""


def _table_problem(found: Mapping[str, List[Tuple[Optional[str], Optional[str], Optional[str]]]],
                   primary_key: Tuple[str, ...], columns: Mapping[str, str], optional: Sequence[str]) -> str:
    _, kind, persistence = found.get("table", [(None, None, None)])[0]
    if kind is None:
        return "there is no such table"
    if kind != "r":
        return f"it is {_KINDS.get(str(kind), 'not a table')}, not an ordinary table"
    if persistence != "p":
        return ("it is UNLOGGED: a server crash empties it, and every key whose receipt it held could run "
                "again" if persistence == "u" else "it is a temporary table, which the store's other connections "
                "never see")
    present = {str(column): (type_, collation) for column, type_, collation in found.get("column", [])}
    missing = [column for column in columns if column not in present and column not in optional]
    if missing:
        return f"it has no column {', '.join(missing)}"
    for column, wanted in columns.items():
        if column not in present:
            continue
        type_, collation = present[column]
        if type_ != wanted:
            return f"its column {column} is {type_}, not {wanted}"
        if collation is not None and collation != "ok":
            return (f"its column {column} compares with the collation {collation}, not \"C\", \"POSIX\" or the "
                    "database default, so two different keys could be taken for one")
    keys = found.get("primary key", [])
    found_key = str(keys[0][1]) if keys else ""
    if found_key != ", ".join(primary_key):  # the store's names need no quoting: a quoted one never matches
        return (f"its primary key is ({found_key}), not ({', '.join(primary_key)}), so processes could each take "
                "the same key")
    for fact, what in (("unique", "a unique index ({!r}) beside its primary key, under which a write to one key "
                                  "could stop or change another's"),
                       ("trigger", "a trigger ({!r}), which could change what the store writes"),
                       ("rule", "a rule ({!r}), which could change what the store writes"),
                       ("child", "a child table ({!r}), whose rows the store's statements would read and change "
                                 "too")):
        for other, _, _ in found.get(fact, []):
            return "it has " + what.format(other)
    return ""

#!/usr/bin/env python3
"""Lists imports that point up the layers of docs/architecture.md
(core < api < shell < sync < cmd < entry), commands importing each
other, and rules of the core written again in the engines or commands
(DECISIONS). Test modules may reach up. Prints nothing and exits 0 when
clean."""
import glob, os, re, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
RANK = {"core": 0, "api": 1, "shell": 2, "sync": 3, "cmd": 4, "entry": 5}
ENTRY = {"cli.rs", "man.rs", "main.rs", "lib.rs"}


def layer_of_file(rel):
    top = rel.split("/")[0]
    if top in ("core", "api", "sync", "cmd"):
        return top
    if rel in ENTRY or top == "bin":
        return "entry"
    return "shell"


def layer_of_module(module):
    if module in ("core", "api", "sync", "cmd"):
        return module
    if module in ("cli", "man"):
        return "entry"
    return "shell"


# Decisions that belong to one core module: seen in sync/ or cmd/, they are
# a rule written twice.
DECISIONS = [
    (r"\bis_subset\(", "the in-sync rule is the core's (compare, plan, convert)"),
    (r'"Cluster(Not)?Ready"|"ClusterNotReachable"|"ClusterReachable"|"ClusterConfigMalformed"',
     "KubeFedCluster conditions are core::cluster_health's"),
    (r'"(Creation|Update|Deletion|LabelRemoval)(TimedOut|Failed)"',
     "cluster statuses are core::plan's and core::retry's"),
    (r"\.propagation\s*==", "whether a type is enabled is FederatedTypeConfigSpec::is_enabled"),
    (r'"adoptResources"|"featureGates"|Scope::parse\(',
     "a KubeFedConfig is read by core::settings"),
]

problems = []
for path in glob.glob(os.path.join(ROOT, "**", "*.rs"), recursive=True):
    rel = os.path.relpath(path, ROOT)
    text = open(path).read()
    cut = text.find("#[cfg(test)]")
    body = text if cut < 0 else text[:cut]
    mine = layer_of_file(rel)
    for m in re.finditer(r"crate::([a-z_]+)(?:::([a-z_]+))?", body):
        line = body[: m.start()].count("\n") + 1
        if body.splitlines()[line - 1].lstrip().startswith("//"):
            continue
        theirs = layer_of_module(m.group(1))
        if RANK[theirs] > RANK[mine]:
            problems.append(f"{rel}:{line}: {mine} imports {theirs} ({m.group(0)})")
        if mine == "cmd" and m.group(1) == "cmd" and m.group(2) not in (None, "options"):
            me = rel.split("/")[1].removesuffix(".rs")
            if m.group(2) != me:
                problems.append(f"{rel}:{line}: a command imports another ({m.group(0)})")
    if mine in ("sync", "cmd"):
        for pattern, why in DECISIONS:
            for m in re.finditer(pattern, body):
                line = body[: m.start()].count("\n") + 1
                if body.splitlines()[line - 1].lstrip().startswith("//"):
                    continue
                problems.append(f"{rel}:{line}: {why} ({m.group(0)})")
for p in sorted(set(problems)):
    print(p)
sys.exit(1 if problems else 0)

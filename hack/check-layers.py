#!/usr/bin/env python3
"""Lists imports that point up the layers of docs/architecture.md
(core < api < shell < sync < cmd < entry), commands importing each
other, rules of the core written again in the engines or commands
(DECISIONS), the passes, reviews and `sync::run` importing `live`
(BELOW_LIVE), shapes the engines keep (ENGINE_SHAPES: no positions into an
observation carried by a job or a rollout, among others), and import circles between the modules of src/ or of
testenv/src/ (two modules that import each other, directly or through
others, are one concept split in two or one in the wrong place), and
modules docs/architecture.md does not name, and functions over 80 lines
outside tests (one that long does several things; name them). Test
modules may reach up. Prints nothing and exits 0 when clean."""
import glob, os, re, sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
CORE = os.path.normpath(os.path.join(ROOT, "..", "crates", "kubefed-core"))
# The pure core is a crate of its own: what it may depend on is this list
# (no client, no runtime, no clock, no terminal), so "no I/O" holds by its
# Cargo.toml and the compiler keeps it from reaching up the layers.
CORE_DEPENDENCIES = {"md5", "schemars", "serde", "serde_json", "serde_path_to_error", "thiserror"}
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
     "KubeFedCluster conditions are core::cluster::health's"),
    (r'"(Creation|Update|Deletion|LabelRemoval)(TimedOut|Failed)"',
     "cluster statuses are core::propagation::action's and retry's"),
    (r"\.propagation\s*==", "whether a type is enabled is FederatedTypeConfigSpec::is_enabled"),
    (r'"adoptResources"|"featureGates"|Scope::parse\(',
     "a KubeFedConfig is read by core::settings"),
]

# Shapes the engines keep (issue #56): the members' health travels with
# them (`ProbedMember`), not as a vector beside them matched by position;
# a run's mode is resolved once (`run::mode::PlanMode`), not a flag
# threaded through the passes; a round's keys live in their observed type;
# a job, a request or a rollout holds its type and object (references, or
# a FederatedRef), not their positions in the observation.
ENGINE_SHAPES = [
    (r"Vec<Health>|&\[Health\]|\.zip\(&?[a-z_.]*health\b",
     "a member's health travels with it: clients::members::ProbedMember"),
    (r"\bdry_run: bool\b|\bvalidate: bool\b",
     "a run's mode is run::mode::PlanMode, resolved once; host writes go through HostWriter"),
    (r"\bpartial\s*:\s*Option<Vec<",
     "a round's keys live in their observed type (ObservedType::only)"),
    (r"\b(?:type|object)_index\s*:|\bObject\(\s*usize\s*\)|\bseen\.types\[[^\]]*\.",
     "no positions into the observation: a job, request or rollout holds &ObservedType and "
     "the federated &Value (execute::Target), or a FederatedRef"),
]

# Inside the engine, `live` calls the passes and reviews and all of them
# share `sync::run` (issue #65): an import of `live` from these would be an
# arrow back up, a circle the module graph below may not show while it
# goes through a third module.
BELOW_LIVE = ("sync/passes/", "sync/review/", "sync/run/")
TO_LIVE = r"\bcrate::sync::live\b|\bcrate::sync::\{[^}]*\blive\b|\bsuper::(?:super::)*live\b"

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
    # A server-side dry-run request parameter (review/files.rs) is a
    # request's option, not a run's mode.
    if mine == "sync" and not rel.startswith("sync/review/") and rel != "sync/run/mode.rs":
        for pattern, why in ENGINE_SHAPES:
            for m in re.finditer(pattern, body):
                line = body[: m.start()].count("\n") + 1
                if not body.splitlines()[line - 1].lstrip().startswith("//"):
                    problems.append(f"{rel}:{line}: {why}")
    # A mode is resolved once (issue #65): no flag's bool threaded through
    # the shell or the commands either.
    for m in re.finditer(r"\bdry_run: bool\b", body):
        line = body[: m.start()].count("\n") + 1
        if not body.splitlines()[line - 1].lstrip().startswith("//"):
            problems.append(f"{rel}:{line}: a command's mode is apply::WriteMode "
                            "(options::DryRunFlag), a run's sync::run::mode::PlanMode")
    if rel.startswith(BELOW_LIVE):
        for m in re.finditer(TO_LIVE, body):
            line = body[: m.start()].count("\n") + 1
            if not body.splitlines()[line - 1].lstrip().startswith("//"):
                problems.append(
                    f"{rel}:{line}: live calls {rel.split('/')[1]}, which may not import live "
                    f"({m.group(0)}): what both need belongs in sync::run"
                )
    if mine in ("sync", "cmd"):
        for pattern, why in DECISIONS:
            for m in re.finditer(pattern, body):
                line = body[: m.start()].count("\n") + 1
                if body.splitlines()[line - 1].lstrip().startswith("//"):
                    continue
                problems.append(f"{rel}:{line}: {why} ({m.group(0)})")


def module_files(root):
    """Module path (tuple) -> file, `mod.rs`/`lib.rs`/`main.rs` naming their folder."""
    files = {}
    for path in glob.glob(os.path.join(root, "**", "*.rs"), recursive=True):
        parts = os.path.relpath(path, root)[:-3].split("/")
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        files[tuple(parts)] = path
    return files


def imports(files, module, path):
    """The modules `module` uses through `crate::`, `super::` or `self::`
    paths (braced lists too), outside its tests and comments."""
    text = open(path).read()
    cut = text.find("#[cfg(test)]")
    body = text if cut < 0 else text[:cut]
    body = "\n".join(l for l in body.splitlines() if not l.lstrip().startswith("//"))
    # `super` is the parent module and `self` the module itself, whether
    # it is `a/b.rs` or `a/b/mod.rs`.
    bases = {"crate": [], "super": list(module[:-1]), "self": list(module)}
    found = set()

    def add(segments):
        for n in range(len(segments), 0, -1):
            target = tuple(segments[:n])
            if target in files:
                # A module's own parents are not imports of it.
                if target != module and module[: len(target)] != target:
                    found.add(target)
                return

    for m in re.finditer(r"\b(crate|super|self)((?:::[a-z_][a-z0-9_]*)*)(?:::\{([^}]*)\})?", body):
        base = bases[m.group(1)] + m.group(2).split("::")[1:]
        if m.group(3) is None:
            add(base)
        else:
            for item in m.group(3).split(","):
                item = item.strip().split("::")
                if item[0] and item[0] != "self":
                    add(base + item)
                elif item[0] == "self":
                    add(base)
    return found


def circles(root):
    """Strongly connected groups of more than one module (Tarjan)."""
    files = module_files(root)
    graph = {m: imports(files, m, p) for m, p in files.items()}
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted("::".join(g) for g in group))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


TREES = (
    (ROOT, "src"),
    (os.path.join(CORE, "src"), "crates/kubefed-core/src"),
    (os.path.join(ROOT, "..", "testenv", "src"), "testenv/src"),
)
for root, name in TREES:
    for group in circles(root):
        problems.append(f"{name}: import circle between {', '.join(group)}")

# No function over 80 lines outside tests, in src/, the core or testenv/src/.
LONGEST = 80
for root, name in TREES:
    for path in glob.glob(os.path.join(root, "**", "*.rs"), recursive=True):
        if os.path.basename(path) == "tests.rs":
            continue
        lines = open(path).read().split("\n")
        end = next((i for i, l in enumerate(lines) if l.startswith("#[cfg(test)]")), len(lines))
        i = 0
        while i < end:
            m = re.match(r"^(\s*)(?:pub(?:\([a-z]+\))? )?(?:async )?fn (\w+)", lines[i])
            if m:
                close = next((j for j in range(i, end) if lines[j] == m.group(1) + "}"), end)
                if close - i + 1 > LONGEST:
                    rel = os.path.relpath(path, root)
                    problems.append(
                        f"{name}/{rel}:{i + 1}: fn {m.group(2)} is {close - i + 1} lines (at most {LONGEST})"
                    )
                i = close
            i += 1

# docs/architecture.md names every module (commands are named by their
# pattern, `src/cmd/<command>.rs`), so that the map stays true.
ARCHITECTURE = open(os.path.join(ROOT, "..", "docs", "architecture.md")).read()
for path in glob.glob(os.path.join(ROOT, "**", "*.rs"), recursive=True) + glob.glob(
    os.path.join(CORE, "src", "**", "*.rs"), recursive=True
):
    rel = os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else os.path.relpath(path, os.path.join(CORE, "src"))
    name = os.path.basename(rel)[:-3]
    if name == "mod":
        name = os.path.basename(os.path.dirname(rel))
    if rel.startswith(("cmd/", "bin/")) or rel in ("lib.rs", "tests.rs") or rel.endswith("/tests.rs"):
        continue
    if not any(n in ARCHITECTURE for n in (f"`{name}`", f"{name}.rs", f"`{name}/", f"{name}/`")):
        problems.append(f"{rel}: not named in docs/architecture.md")

# The core's dependencies (not its dev-dependencies) are the list above.
section = None
for line in open(os.path.join(CORE, "Cargo.toml")):
    line = line.strip()
    if line.startswith("["):
        section = line
    elif section == "[dependencies]" and re.match(r"^[A-Za-z0-9_-]+\s*=", line):
        dep = line.split("=")[0].strip().replace("-", "_")
        if dep not in CORE_DEPENDENCIES:
            problems.append(f"crates/kubefed-core/Cargo.toml: the pure core depends on {dep}")

for p in sorted(set(problems)):
    print(p)
sys.exit(1 if problems else 0)

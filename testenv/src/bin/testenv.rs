//! `testenv up`: run the test control plane by hand.
//!
//! ```text
//! testenv up [--clusters host,member1,member2@1.20] [--kubeconfig ./kc.yaml] [--proxy CLUSTER]... [--nodes]
//! ```
//! `--nodes` gives every cluster a node (pods run; the current release
//! only; the API servers listen on the pods' bridge).
//! Starts the clusters (each on the release `$KUBEFEDCTL_TESTENV_VERSION`
//! names, the current one by default, or the one after its `@`), writes a kubeconfig with one context per cluster
//! (a `--proxy`'d cluster's context goes through a counting proxy), prints how
//! to use it, and runs until Ctrl-C, then stops everything.

use anyhow::{Result, bail};
use std::path::PathBuf;

const USAGE: &str =
    "usage: testenv up [--clusters host,member1,member2[@VERSION]] [--kubeconfig PATH] [--proxy CLUSTER]... [--nodes]
       testenv bin-dir";

struct Options {
    clusters: Vec<String>,
    kubeconfig: PathBuf,
    proxied: Vec<String>,
    nodes: bool,
}

fn parse(args: &[String]) -> Result<Options> {
    let mut o = Options {
        clusters: testenv::SHARED_CLUSTERS
            .iter()
            .map(|s| s.to_string())
            .collect(),
        kubeconfig: PathBuf::from("kubeconfig.testenv.yaml"),
        proxied: Vec::new(),
        nodes: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (a.as_str(), None),
        };
        let mut value = || -> Result<String> {
            match inline.clone().or_else(|| it.next().cloned()) {
                Some(v) => Ok(v),
                None => bail!("{flag} needs a value\n{USAGE}"),
            }
        };
        match flag {
            "--clusters" => {
                o.clusters = value()?
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            }
            "--kubeconfig" => o.kubeconfig = PathBuf::from(value()?),
            "--proxy" => o.proxied.push(value()?),
            "--nodes" => o.nodes = true,
            _ => bail!("unknown argument {a:?}\n{USAGE}"),
        }
    }
    if o.clusters.is_empty() {
        bail!("--clusters names no cluster");
    }
    for p in &o.proxied {
        if !o
            .clusters
            .iter()
            .any(|c| c.split('@').next() == Some(p.as_str()))
        {
            bail!("--proxy {p}: no such cluster in --clusters");
        }
    }
    Ok(o)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("up") => up(parse(&args[1..])?),
        Some("bin-dir") => {
            println!("{}", testenv::binaries_dir().display());
            Ok(())
        }
        _ => bail!("{USAGE}"),
    }
}

fn up(o: Options) -> Result<()> {
    let default = testenv::Version::from_env()?;
    let mut clusters = Vec::new();
    for c in &o.clusters {
        clusters.push(match c.split_once('@') {
            Some((name, v)) => (name, testenv::Version::parse(v)?),
            None => (c.as_str(), default),
        });
    }
    let names: Vec<&str> = clusters.iter().map(|(n, _)| *n).collect();
    let started = std::time::Instant::now();
    let env = if o.nodes {
        if clusters
            .iter()
            .any(|(_, v)| *v != testenv::Version::CURRENT)
        {
            bail!("--nodes: nodes run the current release only");
        }
        testenv::TestEnv::with_nodes(&names, &[])?
    } else {
        testenv::TestEnv::start_mixed(&clusters, &[])?
    };
    let mut kc = env.kubeconfig().current_context(names[0]);
    let mut proxies = Vec::new();
    for p in &o.proxied {
        let proxy = env.proxy(p)?;
        kc = kc.server(p, &proxy.url());
        proxies.push((p.clone(), proxy));
    }
    kc.write(&o.kubeconfig)?;
    let path = std::fs::canonicalize(&o.kubeconfig)?;
    println!(
        "{} cluster(s) ready in {:.1}s, state in {}",
        names.len(),
        started.elapsed().as_secs_f64(),
        env.dir().display()
    );
    for c in env.clusters() {
        let via = proxies
            .iter()
            .find(|(n, _)| n == &c.name)
            .map(|(_, p)| format!(" (context goes through proxy {})", p.url()))
            .unwrap_or_default();
        println!("  {:<10} {} Kubernetes {}{via}", c.name, c.url(), c.version);
    }
    println!("kubeconfig: {}", path.display());
    println!("  export KUBECONFIG={}", path.display());
    println!(
        "  kubectl --context {} get ns",
        names.last().expect("one cluster")
    );
    println!("Ctrl-C stops everything.");

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        anyhow::Ok(())
    })?;
    for (name, proxy) in &proxies {
        let recs = proxy.records();
        println!(
            "proxy {name}: {} requests, {} writes",
            recs.len(),
            proxy.writes()
        );
    }
    drop(proxies);
    drop(env);
    println!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_flags_in_both_spellings() {
        let o = parse(&strings(&[
            "--clusters",
            "a,b",
            "--kubeconfig=x.yaml",
            "--proxy",
            "b",
        ]))
        .unwrap();
        assert_eq!(o.clusters, ["a", "b"]);
        assert_eq!(o.kubeconfig, PathBuf::from("x.yaml"));
        assert_eq!(o.proxied, ["b"]);
        assert!(parse(&strings(&["--proxy", "zzz"])).is_err());
        assert!(parse(&strings(&["--bogus"])).is_err());
        assert!(parse(&strings(&["--clusters"])).is_err());
    }
}

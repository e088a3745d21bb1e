//! How `status` shows what it observed: kubectl-style tables (no
//! borders; colours only on a terminal).

use super::data::{ClusterRow, DnsRow, NOT_SERVED, ObjectRow, SERVES, TypeRow};
use comfy_table::{Cell, Color};
use std::collections::BTreeMap;

pub(super) fn dns_table(rows: &[DnsRow]) -> String {
    if rows.is_empty() {
        return "No DNS records (ServiceDNSRecord / IngressDNSRecord, then kubefedctl reconcile).\n".into();
    }
    let mut t = table(&[
        "NAMESPACE",
        "ENDPOINT",
        "DNS NAME",
        "TYPE",
        "TTL",
        "TARGETS",
    ]);
    for r in rows {
        t.add_row(vec![
            Cell::new(&r.namespace),
            Cell::new(&r.endpoint),
            Cell::new(&r.dns_name),
            Cell::new(&r.record_type),
            Cell::new(r.ttl),
            Cell::new(r.targets.join(",")),
        ]);
    }
    render(&t)
}

use crate::terminal::output::table;

use crate::terminal::output::table_text as render;

pub(super) fn ready_cell(text: &str, colour: bool) -> Cell {
    let cell = Cell::new(text);
    if !colour {
        return cell;
    }
    if text == "True" {
        cell.fg(Color::Green)
    } else {
        cell.fg(Color::Red)
    }
}

pub fn clusters_table(rows: &[ClusterRow], wide: bool, colour: bool) -> String {
    let mut headers = vec![
        "NAME",
        "READY",
        "KUBERNETES VERSION",
        "ENDPOINT",
        "REGION/ZONES",
    ];
    if wide {
        headers.extend(["MODE", "IDENTITY", "TOKEN EXPIRES", "INVENTORY", "MESSAGE"]);
    }
    let mut t = table(&headers);
    if colour {
        t.enforce_styling();
    }
    for r in rows {
        let zones = match (r.region.as_str(), r.zones.is_empty()) {
            ("", true) => "-".to_string(),
            (region, _) => format!(
                "{}{}{}",
                region,
                if r.zones.is_empty() { "" } else { "/" },
                r.zones.join(",")
            ),
        };
        let mut cells = vec![
            Cell::new(&r.name),
            ready_cell(&r.ready, colour),
            Cell::new(if r.kubernetes_version.is_empty() {
                "-"
            } else {
                &r.kubernetes_version
            }),
            Cell::new(&r.endpoint),
            Cell::new(zones),
        ];
        if wide {
            cells.push(Cell::new(&r.mode));
            cells.push(Cell::new(&r.identity));
            cells.push(Cell::new(&r.token_expires));
            cells.push(Cell::new(if r.inventory.is_empty() {
                "-"
            } else {
                &r.inventory
            }));
            cells.push(Cell::new(&r.message));
        }
        t.add_row(cells);
    }
    if rows.is_empty() {
        return "No member clusters joined (kubefedctl join CLUSTER).\n".into();
    }
    render(&t)
}

pub fn types_table(rows: &[TypeRow], wide: bool) -> String {
    if rows.is_empty() {
        return "No federated types (kubefedctl enable TYPE).\n".into();
    }
    let probed = rows.iter().any(|r| r.members.is_some());
    let mut headers = vec!["TYPE", "FEDERATED KIND", "PROPAGATION", "OBJECTS"];
    if wide {
        headers.extend(["PROPAGATED", "FEDERATED TYPE"]);
    }
    if probed {
        headers.push("MEMBERS");
    }
    let mut t = table(&headers);
    for r in rows {
        let mut cells = vec![
            Cell::new(&r.name),
            Cell::new(&r.federated_kind),
            Cell::new(&r.propagation),
            Cell::new(r.objects),
        ];
        if wide {
            cells.extend([Cell::new(r.propagated), Cell::new(&r.federated_type)]);
        }
        if probed {
            cells.push(Cell::new(serving_text(r.members.as_ref())));
        }
        t.add_row(cells);
    }
    render(&t)
}

/// `m1,m2`, or `m1 (not served: m2)`, or `m1 (unknown: m3)`.
pub(super) fn serving_text(members: Option<&BTreeMap<String, String>>) -> String {
    let Some(members) = members else {
        return "-".into();
    };
    let with = |want: &dyn Fn(&str) -> bool| {
        members
            .iter()
            .filter(|(_, v)| want(v))
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    let serves = with(&|v| v == SERVES);
    let mut text = if serves.is_empty() {
        "none".to_string()
    } else {
        serves
    };
    for (label, rule) in [
        (
            "not served",
            &(|v: &str| v == NOT_SERVED) as &dyn Fn(&str) -> bool,
        ),
        ("unknown", &|v: &str| v.starts_with("unknown")),
    ] {
        let names = with(rule);
        if !names.is_empty() {
            text.push_str(&format!(" ({label}: {names})"));
        }
    }
    text
}

pub fn objects_table(rows: &[ObjectRow], wide: bool, colour: bool) -> String {
    if rows.is_empty() {
        return "No federated objects found.\n".into();
    }
    let explained = rows
        .iter()
        .flat_map(|r| &r.clusters)
        .any(|c| c.message.is_some());
    let counted = rows
        .iter()
        .flat_map(|r| &r.clusters)
        .any(|c| c.ready.is_some());
    let mut headers = vec!["NAMESPACE", "NAME", "PLACEMENT", "PROPAGATED", "CLUSTERS"];
    if counted {
        headers.push("READY");
    }
    if wide {
        headers.push("REASON");
        if explained {
            headers.push("MESSAGE");
        }
    }
    let mut t = table(&headers);
    if colour {
        t.enforce_styling();
    }
    for r in rows {
        let clusters = if r.clusters.is_empty() {
            "-".to_string()
        } else {
            r.clusters
                .iter()
                .map(|c| format!("{}:{}", c.name, c.live.as_deref().unwrap_or(&c.status)))
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut cells = vec![
            Cell::new(if r.namespace.is_empty() {
                "-"
            } else {
                &r.namespace
            }),
            Cell::new(&r.name),
            Cell::new(&r.placement),
            ready_cell(&r.propagation, colour),
            Cell::new(clusters),
        ];
        if counted {
            let ready: Vec<String> = r
                .clusters
                .iter()
                .filter_map(|c| Some(format!("{}:{}", c.name, c.ready.as_ref()?)))
                .collect();
            cells.push(Cell::new(if ready.is_empty() {
                "-".to_string()
            } else {
                ready.join(",")
            }));
        }
        if wide {
            let messages: Vec<String> = r
                .clusters
                .iter()
                .filter_map(|c| c.message.as_ref())
                .cloned()
                .collect();
            cells.push(Cell::new(&r.reason));
            if explained {
                cells.push(Cell::new(messages.join("; ")));
            }
        }
        t.add_row(cells);
    }
    render(&t)
}

/// One line: how much of the federation is healthy.
pub fn summary(clusters: &[ClusterRow], types: &[TypeRow]) -> String {
    let ready = clusters.iter().filter(|c| c.ready == "True").count();
    let objects: usize = types.iter().map(|t| t.objects - t.ignored).sum();
    let propagated: usize = types.iter().map(|t| t.propagated).sum();
    format!(
        "Propagation: {propagated} of {objects} federated object(s) propagated; {ready} of {} cluster(s) ready.",
        clusters.len()
    )
}

//! The sweep's figures as one tidy CSV (`members,objects,shards,measure,
//! value,unit`, one figure a line): read back at start, so that a part
//! measured again (one point, the sharded row) replaces only its own
//! lines, and written after every point, so that an interrupted sweep
//! keeps what it measured.

use std::path::{Path, PathBuf};

const HEADER: &str = "members,objects,shards,measure,value,unit";

#[derive(Clone, Debug)]
pub struct Row {
    pub members: usize,
    pub objects: usize,
    /// 1 for an unsharded run.
    pub shards: u32,
    /// `family.figure`, e.g. `first_run.wall_s`.
    pub measure: String,
    pub value: f64,
    pub unit: String,
}

impl Row {
    /// Rows of one point: `row("first_run.wall_s", 12.3, "s")`.
    pub fn maker(members: usize, objects: usize, shards: u32) -> impl Fn(&str, f64, &str) -> Row {
        move |measure, value, unit| Row {
            members,
            objects,
            shards,
            measure: measure.to_string(),
            value,
            unit: unit.to_string(),
        }
    }

    fn key(&self) -> (usize, usize, u32, &str) {
        (self.members, self.objects, self.shards, &self.measure)
    }

    fn parse(line: &str) -> Option<Row> {
        let f: Vec<&str> = line.split(',').collect();
        let [members, objects, shards, measure, value, unit] = f[..] else {
            return None;
        };
        Some(Row {
            members: members.parse().ok()?,
            objects: objects.parse().ok()?,
            shards: shards.parse().ok()?,
            measure: measure.to_string(),
            value: value.parse().ok()?,
            unit: unit.to_string(),
        })
    }
}

pub struct Table {
    path: PathBuf,
    rows: Vec<Row>,
}

impl Table {
    /// The figures at `path` so far (none when there is no such file).
    pub fn load(path: &Path) -> Table {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        Table {
            path: path.to_path_buf(),
            rows: text.lines().skip(1).filter_map(Row::parse).collect(),
        }
    }

    /// Adds `rows`, replacing the figures of the same point and measure,
    /// and writes the file.
    pub fn put(&mut self, rows: Vec<Row>) {
        self.rows
            .retain(|old| !rows.iter().any(|new| new.key() == old.key()));
        self.rows.extend(rows);
        self.rows.sort_by(|a, b| a.key().cmp(&b.key()));
        let mut text = format!("{HEADER}\n");
        for r in &self.rows {
            // Four decimals at most: seconds to 0.1 ms, MiB to 0.1 KiB.
            let value = (r.value * 1e4).round() / 1e4;
            text.push_str(&format!(
                "{},{},{},{},{value},{}\n",
                r.members, r.objects, r.shards, r.measure, r.unit
            ));
        }
        let tmp = self.path.with_extension("csv.tmp");
        std::fs::write(&tmp, text).expect("writing the CSV");
        std::fs::rename(&tmp, &self.path).expect("writing the CSV");
    }

    /// `measure` at each number of objects, for `members` and `shards`.
    pub fn series(&self, members: usize, shards: u32, measure: &str) -> Vec<(f64, f64)> {
        let mut points: Vec<(f64, f64)> = self
            .rows
            .iter()
            .filter(|r| r.members == members && r.shards == shards && r.measure == measure)
            .filter(|r| r.value.is_finite())
            .map(|r| (r.objects as f64, r.value))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        points
    }

    /// The member counts and shard counts measured.
    pub fn members(&self) -> Vec<usize> {
        let mut m: Vec<usize> = self.rows.iter().map(|r| r.members).collect();
        m.sort();
        m.dedup();
        m
    }

    pub fn sharded(&self) -> Vec<(usize, u32)> {
        let mut s: Vec<(usize, u32)> = self
            .rows
            .iter()
            .filter(|r| r.shards > 1)
            .map(|r| (r.members, r.shards))
            .collect();
        s.sort();
        s.dedup();
        s
    }

    fn value(&self, members: usize, objects: usize, shards: u32, measure: &str) -> String {
        self.rows
            .iter()
            .find(|r| r.key() == (members, objects, shards, measure))
            .map_or("—".into(), |r| {
                if r.value.abs() >= 100.0 || r.value.fract() == 0.0 {
                    format!("{:.0}", r.value)
                } else if r.value.abs() >= 1.0 {
                    format!("{:.1}", r.value)
                } else {
                    format!("{:.3}", r.value)
                }
            })
    }

    /// The main figures of every point, as a Markdown table on stdout.
    pub fn print_summary(&self) {
        let columns = [
            ("first run s", "first_run.wall_s"),
            (
                "member writes / (obj × member)",
                "first_run.member_writes_per_object_member",
            ),
            ("host writes / obj", "first_run.host_writes_per_object"),
            ("first run CPU s", "first_run.cpu_s"),
            ("first run peak RSS MiB", "first_run.peak_rss_mib"),
            ("no-op s", "noop.wall_s"),
            ("no-op member requests", "noop.member_requests"),
            ("watch sync s", "watch.initial_sync_s"),
            ("p50 s", "watch.p50_s"),
            ("p99 s", "watch.p99_s"),
            ("reaction p99 s", "watch.reaction_p99_s"),
            ("member answer p99 s", "watch.member_answer_p99_s"),
            ("changes/s", "watch.rate_per_s"),
            ("burst cores: watch", "watch.burst_watch_cores"),
            (
                "burst cores: control planes",
                "watch.burst_control_plane_cores",
            ),
            ("burst cores: machine", "watch.burst_machine_cores"),
            ("idle RSS MiB", "watch.idle_rss_mib"),
            ("peak RSS MiB", "watch.peak_rss_mib"),
            ("idle CPU %", "watch.idle_cpu_pct"),
        ];
        let mut points: Vec<(usize, usize, u32)> = self
            .rows
            .iter()
            .map(|r| (r.members, r.objects, r.shards))
            .collect();
        points.sort();
        points.dedup();
        let heads: Vec<&str> = columns.iter().map(|c| c.0).collect();
        println!("\n| members | objects | shards | {} |", heads.join(" | "));
        println!("|---|---|---|{}", "---|".repeat(columns.len()));
        for (m, o, s) in points {
            let cells: Vec<String> = columns.iter().map(|c| self.value(m, o, s, c.1)).collect();
            println!("| {m} | {o} | {s} | {} |", cells.join(" | "));
        }
    }
}

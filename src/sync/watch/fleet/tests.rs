//! The fleet alone: thresholds, stalls, readiness news and the probe in
//! flight, on members without clients (their probe answers at once) and
//! a paused clock.

use super::*;
use crate::clients::members::{CREDENTIALS_REFUSED, Stall};
use std::sync::Arc;

fn ready() -> Health {
    Health::Ready {
        version: "v1.37.2".into(),
    }
}

fn offline() -> Health {
    Health::Offline {
        message: "connection refused".into(),
    }
}

fn probed(name: &str, health: Health) -> ProbedMember {
    ProbedMember {
        member: Member::without_client(name),
        health,
    }
}

/// KubeFed's defaults: 3 failures to turn not ready, 1 success back.
fn thresholds() -> HealthCheck {
    HealthCheck {
        failure_threshold: 3,
        success_threshold: 1,
        ..HealthCheck::default()
    }
}

fn health_of(fleet: &Fleet, name: &str) -> Health {
    let p = fleet.members().iter().find(|p| p.name() == name);
    p.expect("a member").health.clone()
}

/// A probe's result per member, by name: the order of the probe's list
/// does not matter.
#[test]
fn a_member_turns_not_ready_only_after_the_failure_threshold() {
    let mut fleet = Fleet::default();
    fleet.replace(vec![probed("m1", ready()), probed("m2", ready())]);
    for _ in 0..2 {
        let news = fleet.take_probe(
            vec![probed("m2", ready()), probed("m1", offline())],
            thresholds(),
        );
        assert_eq!(news, ProbeNews::default());
        assert!(health_of(&fleet, "m1").is_ready());
    }
    let news = fleet.take_probe(
        vec![probed("m1", offline()), probed("m2", ready())],
        thresholds(),
    );
    assert!(news.changed && news.back.is_empty());
    assert_eq!(health_of(&fleet, "m1"), offline());
    let news = fleet.take_probe(
        vec![probed("m1", ready()), probed("m2", ready())],
        thresholds(),
    );
    assert!(news.changed);
    assert_eq!(news.back, ["m1".to_string()].into());
}

/// A probe that agrees with the readiness resets the streak: failures
/// must be in a row.
#[test]
fn failures_must_come_in_a_row() {
    let mut fleet = Fleet::default();
    fleet.replace(vec![probed("m1", ready())]);
    let probe = |h: Health| vec![probed("m1", h)];
    for h in [offline(), offline(), ready(), offline(), offline()] {
        fleet.take_probe(probe(h), thresholds());
    }
    assert!(health_of(&fleet, "m1").is_ready());
    // A rebuild keeps the streak of a member still there.
    fleet.replace(vec![probed("m1", ready())]);
    fleet.take_probe(probe(offline()), thresholds());
    assert!(!health_of(&fleet, "m1").is_ready());
}

/// Refused credentials ask for new clients once the thresholds count
/// them (the member is then not ready), and at every probe after that.
#[test]
fn refused_credentials_ask_for_new_clients_once_counted() {
    let mut fleet = Fleet::default();
    fleet.replace(vec![probed("m1", ready())]);
    let refused = || Health::NotReady {
        message: format!("{CREDENTIALS_REFUSED}: 401"),
    };
    for _ in 0..2 {
        let news = fleet.take_probe(vec![probed("m1", refused())], thresholds());
        assert!(!news.credentials_refused && !news.changed);
    }
    let news = fleet.take_probe(vec![probed("m1", refused())], thresholds());
    assert!(news.credentials_refused && news.changed);
    let news = fleet.take_probe(vec![probed("m1", refused())], thresholds());
    assert!(news.credentials_refused && !news.changed);
}

/// A member that stops answering a round's requests is offline at once,
/// and stays offline until a probe that it answers (which clears its
/// stall, so that requests go to it again).
#[test]
fn a_stalled_member_is_offline_at_once_until_it_answers_a_probe() {
    let stall = Arc::new(Stall::default());
    let mut m1 = probed("m1", ready());
    m1.member.stalled = Some(stall.clone());
    let mut fleet = Fleet::default();
    fleet.replace(vec![m1.clone(), probed("m2", ready())]);
    assert!(!stall.is_set());
    assert!(fleet.notice_stalled(Duration::from_secs(5)).is_empty());
    stall.set();
    assert_eq!(fleet.notice_stalled(Duration::from_secs(5)), ["m1"]);
    let Health::Offline { message } = health_of(&fleet, "m1") else {
        panic!("m1 is not offline");
    };
    assert_eq!(message, "cluster is not reachable: no answer within 5s");
    assert!(fleet.notice_stalled(Duration::from_secs(5)).is_empty());
    let news = fleet.take_probe(vec![m1], thresholds());
    assert_eq!(news.back, ["m1".to_string()].into());
    assert!(!stall.is_set());
}

/// A rebuild names the members whose readiness changed (for the log),
/// not the new ones.
#[test]
fn replacing_the_members_names_those_whose_readiness_changed() {
    let mut fleet = Fleet::default();
    assert!(fleet.replace(vec![probed("m1", ready())]).is_empty());
    let changed = fleet.replace(vec![probed("m1", offline()), probed("m2", ready())]);
    let names: Vec<&str> = changed.iter().map(|p| p.name()).collect();
    assert_eq!(names, ["m1"]);
    assert!(fleet.contains("m2") && !fleet.contains("m3"));
}

/// The probe runs beside the loop; its result counts only for the
/// members it probed: once they are replaced, it is dropped.
#[tokio::test(start_paused = true)]
async fn a_probe_of_members_since_replaced_is_dropped() {
    let mut fleet = Fleet::default();
    fleet.replace(vec![probed("m1", ready())]);
    let took = Arc::new(std::sync::Mutex::new(None));
    let told = took.clone();
    fleet.start_probe(Duration::from_secs(3), move |t| {
        *told.lock().unwrap() = Some(t)
    });
    let result = fleet
        .probe_done()
        .await
        .expect("a probe of the current members");
    assert!(
        matches!(&result[0].health, Health::ConfigMalformed { message } if message == "none in unit tests")
    );
    assert_eq!(*took.lock().unwrap(), Some(Duration::ZERO));
    fleet.start_probe(Duration::from_secs(3), |_| {});
    // A second start while one runs does not start another.
    fleet.start_probe(Duration::from_secs(3), |_| panic!("a second probe"));
    fleet.replace(vec![probed("m2", ready())]);
    assert!(fleet.probe_done().await.is_none());
    // No probe in flight: waiting for one never ends.
    let waited = tokio::time::timeout(Duration::from_secs(60), fleet.probe_done()).await;
    assert!(waited.is_err());
}

//! Which TLS checks a member's `spec.disabledTLSValidations` turns off, read
//! as KubeFed v0.10 reads it (`pkg/controller/util/cluster_util.go`,
//! `CustomizeCertificateValidation`): `*` anywhere turns off every check;
//! `SubjectName` skips only the host-name check and `ValidityPeriod` only the
//! validity check, while the chain is still verified against the `caBundle`.
//!
//! Differs on purpose: upstream ignores a value it does not know, so a typo
//! (`subjectName`) silently keeps the check and the member goes Offline with a
//! certificate error. Here it is an error naming the field and the value.

/// The TLS verification a member's client does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsChecks {
    /// Every check (the default).
    Full,
    /// `*`: no verification at all.
    None,
    /// The chain is verified; the named checks are skipped.
    Relaxed {
        subject_name: bool,
        validity_period: bool,
    },
}

/// A `spec.disabledTLSValidations` value KubeFed does not define.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error(
    "spec.disabledTLSValidations: unknown value {0:?} (expected \"*\", \"SubjectName\" or \"ValidityPeriod\")"
)]
pub struct UnknownValidation(String);

/// Reads `spec.disabledTLSValidations`.
pub fn tls_checks(disabled: &[String]) -> Result<TlsChecks, UnknownValidation> {
    if disabled.iter().any(|v| v == "*") {
        return Ok(TlsChecks::None);
    }
    let (mut subject_name, mut validity_period) = (false, false);
    for value in disabled {
        match value.as_str() {
            "SubjectName" => subject_name = true,
            "ValidityPeriod" => validity_period = true,
            other => return Err(UnknownValidation(other.to_string())),
        }
    }
    Ok(if subject_name || validity_period {
        TlsChecks::Relaxed {
            subject_name,
            validity_period,
        }
    } else {
        TlsChecks::Full
    })
}

/// The moment a certificate's chain is checked at when `ValidityPeriod` is
/// disabled: one second after the serving certificate's `notBefore`, as
/// upstream sets `x509.VerifyOptions.CurrentTime`.
pub fn validity_check_time(not_before_unix: i64) -> i64 {
    not_before_unix + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checks(values: &[&str]) -> Result<TlsChecks, UnknownValidation> {
        tls_checks(&values.iter().map(|v| v.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn reads_disabled_validations_as_upstream() {
        let relaxed = |subject_name, validity_period| TlsChecks::Relaxed {
            subject_name,
            validity_period,
        };
        let cases: &[(&[&str], TlsChecks)] = &[
            (&[], TlsChecks::Full),
            (&["*"], TlsChecks::None),
            (&["SubjectName", "*"], TlsChecks::None),
            (&["typo", "*"], TlsChecks::None),
            (&["SubjectName"], relaxed(true, false)),
            (&["ValidityPeriod"], relaxed(false, true)),
            (&["ValidityPeriod", "SubjectName"], relaxed(true, true)),
            (&["SubjectName", "SubjectName"], relaxed(true, false)),
        ];
        for (values, want) in cases {
            assert_eq!(checks(values), Ok(*want), "{values:?}");
        }
    }

    #[test]
    fn an_unknown_value_is_an_error_naming_the_field_and_value() {
        let err = checks(&["subjectName"]).unwrap_err().to_string();
        assert!(err.contains("spec.disabledTLSValidations"), "{err}");
        assert!(err.contains("\"subjectName\""), "{err}");
    }

    #[test]
    fn the_validity_check_moves_to_just_after_not_before() {
        assert_eq!(validity_check_time(1_600_000_000), 1_600_000_001);
    }
}

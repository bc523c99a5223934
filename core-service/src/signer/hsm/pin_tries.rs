//! How often a PIN the token refused is tried again: at most once a `PIN_RETRY`, and not at
//! all after `MAX_REFUSALS` refusals (until a restart with the right PIN), as a real device
//! locks a PIN after a few wrong tries.

use std::time::{Duration, Instant};

/// How long after the token refused the PIN a login is tried again.
pub(super) const PIN_RETRY: Duration = Duration::from_secs(60);
/// How many refusals end the tries.
pub(super) const MAX_REFUSALS: u32 = 3;

/// The refusals of the PIN seen since the start.
#[derive(Debug, Default)]
pub(super) struct PinTries {
    refusals: u32,
    last: Option<Instant>,
}

impl PinTries {
    /// Why a login may not be tried `now`, if it may not.
    pub(super) fn held_back(&self, now: Instant) -> Option<String> {
        if self.refusals >= MAX_REFUSALS {
            return Some(format!(
                "refused hsm.pin {} times; it is not tried again, so as not to lock the token: set the token's PIN and restart",
                self.refusals
            ));
        }
        let since = now.saturating_duration_since(self.last?);
        (since < PIN_RETRY).then(|| {
            format!(
                "refused hsm.pin {} s ago; it is tried again at most once a minute, so as not to lock the token: set the token's PIN and restart",
                since.as_secs()
            )
        })
    }

    /// The token refused the PIN at `now`.
    pub(super) fn refused(&mut self, now: Instant) {
        self.refusals += 1;
        self.last = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_pin_is_tried_once_a_minute_and_not_after_three_refusals() {
        let start = Instant::now();
        let mut tries = PinTries::default();
        assert_eq!(tries.held_back(start), None, "never refused");
        for n in 1..MAX_REFUSALS {
            let at = start + PIN_RETRY * (n * 2);
            tries.refused(at);
            let held = tries
                .held_back(at + Duration::from_secs(5))
                .expect("held back");
            assert!(held.contains("once a minute"), "{held}");
            assert_eq!(
                tries.held_back(at + PIN_RETRY),
                None,
                "tried again after a minute"
            );
        }
        let at = start + PIN_RETRY * 10;
        tries.refused(at);
        let held = tries
            .held_back(at + PIN_RETRY * 60)
            .expect("held back for good");
        assert!(
            held.contains("3 times") && held.contains("not tried again"),
            "{held}"
        );
    }
}

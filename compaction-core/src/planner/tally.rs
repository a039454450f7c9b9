//! [`Tally`]: the running cost of a compaction point's request, where a cost may only be
//! known to pass the limit it was counted against ([`OVER`]), so counting can stop early.

/// A cost that passed the limit it was counted against.
pub(crate) const OVER: usize = usize::MAX / 8;

/// A sum of costs, some of which are only known to pass the limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    sum: usize,
    overs: usize,
}

impl Tally {
    pub(crate) fn add(&mut self, cost: usize) {
        if cost >= OVER {
            self.overs += 1;
        } else {
            self.sum += cost;
        }
    }

    pub(crate) fn sub(&mut self, cost: usize) {
        if cost >= OVER {
            self.overs -= 1;
        } else {
            self.sum -= cost;
        }
    }

    /// Whether it is at most `limit`.
    pub(crate) fn fits(&self, limit: usize) -> bool {
        self.overs == 0 && self.sum <= limit
    }

    /// What is left under `limit` (0 when over).
    pub(crate) fn left(&self, limit: usize) -> usize {
        if self.overs > 0 {
            0
        } else {
            limit.saturating_sub(self.sum)
        }
    }
}

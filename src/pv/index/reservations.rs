//! Reservations: a free volume kept for one claim while that claim's
//! binding is under way, so that searches for every other claim pass it by.

use super::{Reserved, VolumeIndex};
use crate::runtime::keys::ObjectKey;

impl VolumeIndex {
    /// Reserves the volume of that name for `claim`: until as many
    /// [`VolumeIndex::release`]s, searches for other claims pass it by.
    /// Returns false (and reserves nothing) when it is reserved for another
    /// claim already.
    pub fn reserve(&mut self, name: &str, claim: &ObjectKey) -> bool {
        self.changes += 1;
        match self.reserved.get_mut(name) {
            Some(reserved) if reserved.claim == *claim => {
                reserved.count += 1;
                true
            }
            Some(_) => false,
            None => {
                self.reserved.insert(
                    name.to_owned(),
                    Reserved {
                        claim: claim.clone(),
                        count: 1,
                    },
                );
                true
            }
        }
    }

    /// Drops one reservation of the volume of that name for `claim`.
    /// Returns whether this made a free volume searchable for every claim
    /// again (the last reservation ended and the binding failed): news for the
    /// claims that found nothing.
    pub fn release(&mut self, name: &str, claim: &ObjectKey) -> bool {
        self.changes += 1;
        let Some(reserved) = self.reserved.get_mut(name) else {
            return false;
        };
        if reserved.claim != *claim {
            return false;
        }
        reserved.count -= 1;
        if reserved.count > 0 {
            return false;
        }
        self.reserved.remove(name);
        self.is_free(name)
    }

    /// Whether the volume of that name is reserved for a claim being bound.
    pub fn is_reserved(&self, name: &str) -> bool {
        self.reserved.contains_key(name)
    }
}

//! What a decision holds until its plan ends: a hold, kept apart from the
//! plan that carries it and the journal that may keep it, so both can name
//! it.

use std::any::Any;

/// Something a decision holds until its plan ends (an object reserved for
/// another), with the objects it is about, so that a journal
/// ([`crate::journal`]) can keep it until the cluster shows what became of
/// them.
pub struct Hold {
    /// The UID of the object the hold is for.
    pub holder: String,
    /// The name of the object held for it.
    pub held: String,
    /// Releases the hold when dropped.
    pub guard: Box<dyn Any + Send>,
}

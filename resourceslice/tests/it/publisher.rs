//! The publisher's promises beyond upstream's table.

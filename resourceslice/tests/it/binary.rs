//! dra-publish.

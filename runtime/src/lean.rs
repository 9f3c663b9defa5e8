//! Decoding objects without their `metadata.managedFields`.
//!
//! A real API server puts server-side apply's bookkeeping on every object:
//! often larger than the rest of it, nested JSON that becomes a tree of
//! maps when decoded, and read by nothing here (every kind's trim drops
//! it). Decoding every watch event, listed object and write answer through
//! [`Lean`] skips those bytes instead of building the tree and dropping
//! it (docs/performance-notes.md, "The controller's CPU per write").
//!
//! Only the object's own `metadata` is filtered: the key is matched at that
//! one place, so an annotation, label or field named `managedFields`
//! anywhere else decodes as before. [`WithManagers`] decodes the same way
//! but keeps who wrote the object ([`FieldManager`]), not the field tree.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{
    DeserializeOwned, DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, Visitor,
};
use serde::{Deserialize, forward_to_deserialize_any};

use crate::managers::FieldManager;

/// An object of kind `K` that decodes without its managedFields; the type
/// the watches and the write door ask kube to decode.
#[derive(Clone, Debug)]
pub struct Lean<K>(pub K);

/// Makes `$wrapper<K>` the resource `K` is, so kube asks for and decodes
/// it as `K`.
macro_rules! resource_of_inner {
    ($wrapper:ident) => {
        impl<K: Resource> Resource for $wrapper<K> {
            type DynamicType = K::DynamicType;
            type Scope = K::Scope;

            fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
                K::kind(dt)
            }
            fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
                K::group(dt)
            }
            fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
                K::version(dt)
            }
            fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
                K::api_version(dt)
            }
            fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
                K::plural(dt)
            }
            fn meta(&self) -> &ObjectMeta {
                self.0.meta()
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                self.0.meta_mut()
            }
        }
    };
}

resource_of_inner!(Lean);
resource_of_inner!(WithManagers);

impl<'de, K: DeserializeOwned> Deserialize<'de> for Lean<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(Filter {
            inner: deserializer,
            level: Level::Object,
            sink: None,
        })
        .map(Lean)
    }
}

/// An object of kind `K` decoded as [`Lean`] decodes it, with the field
/// managers its managedFields named ([`FieldManager`]: who, when, which
/// fields, two levels deep) instead of the whole tree: what a watch
/// decodes for a kind whose writers someone reads.
#[derive(Clone, Debug)]
pub struct WithManagers<K>(pub K, pub Vec<FieldManager>);

impl<'de, K: DeserializeOwned> Deserialize<'de> for WithManagers<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let sink = RefCell::new(Vec::new());
        let object = K::deserialize(Filter {
            inner: deserializer,
            level: Level::Object,
            sink: Some(&sink),
        })?;
        Ok(WithManagers(object, sink.into_inner()))
    }
}

/// Where the field managers of the object being decoded go, if anywhere.
type Sink<'s> = Option<&'s RefCell<Vec<FieldManager>>>;

/// Where a map of the decoded JSON sits.
#[derive(Clone, Copy)]
enum Level {
    /// The object itself: its `metadata` is filtered.
    Object,
    /// The object's `metadata`: its `managedFields` are skipped.
    Metadata,
}

/// JSON at `level`, handing its maps to [`Filtered`] maps.
struct Filter<'s, D> {
    inner: D,
    level: Level,
    sink: Sink<'s>,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Filter<'_, D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(Maps {
            visitor,
            level: self.level,
            sink: self.sink,
        })
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_option(Maps {
            visitor,
            level: self.level,
            sink: self.sink,
        })
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// A visitor that hands the maps it meets to the inner visitor as
/// [`Filtered`] maps; anything else is not an object and fails as the
/// inner visitor would have it.
struct Maps<'s, V> {
    visitor: V,
    level: Level,
    sink: Sink<'s>,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Maps<'_, V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        self.visitor.expecting(formatter)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(Filtered {
            map,
            level: self.level,
            metadata_next: false,
            sink: self.sink,
        })
    }

    fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_some(Filter {
            inner,
            level: self.level,
            sink: self.sink,
        })
    }

    fn visit_none<E: Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_unit<E: Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_unit()
    }
}

/// A map that skips `managedFields` in the metadata and filters the
/// metadata of the object.
struct Filtered<'s, A> {
    map: A,
    level: Level,
    metadata_next: bool,
    sink: Sink<'s>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Filtered<'_, A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, A::Error> {
        loop {
            let Some(key) = self.map.next_key::<Key<'de>>()? else {
                return Ok(None);
            };
            match self.level {
                Level::Metadata if key.as_str() == "managedFields" => match self.sink {
                    Some(sink) => {
                        let managers = self.map.next_value::<Option<Vec<FieldManager>>>()?;
                        sink.borrow_mut().extend(managers.unwrap_or_default());
                    }
                    None => {
                        self.map.next_value::<IgnoredAny>()?;
                    }
                },
                Level::Metadata => return key.into_seed(seed).map(Some),
                Level::Object => {
                    self.metadata_next = key.as_str() == "metadata";
                    return key.into_seed(seed).map(Some);
                }
            }
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if std::mem::take(&mut self.metadata_next) {
            self.map.next_value_seed(MetadataSeed(seed, self.sink))
        } else {
            self.map.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// The seed of the metadata's value, decoded at [`Level::Metadata`].
struct MetadataSeed<'s, S>(S, Sink<'s>);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for MetadataSeed<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Filter {
            inner: deserializer,
            level: Level::Metadata,
            sink: self.1,
        })
    }
}

/// A map key, borrowed from the input when it can be.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl<'de> Key<'de> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(key) => key,
            Key::Owned(key) => key,
        }
    }

    /// Gives the key to the seed that would have read it.
    fn into_seed<S: DeserializeSeed<'de>, E: Error>(self, seed: S) -> Result<S::Value, E> {
        match self {
            Key::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::<E>::new(key)),
            Key::Owned(key) => seed.deserialize(StringDeserializer::<E>::new(key)),
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor(PhantomData))
    }
}

/// Reads a [`Key`].
struct KeyVisitor<'de>(PhantomData<&'de ()>);

impl<'de> Visitor<'de> for KeyVisitor<'de> {
    type Value = Key<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a field name")
    }

    fn visit_borrowed_str<E: Error>(self, key: &'de str) -> Result<Key<'de>, E> {
        Ok(Key::Borrowed(key))
    }

    fn visit_str<E: Error>(self, key: &str) -> Result<Key<'de>, E> {
        Ok(Key::Owned(key.to_owned()))
    }

    fn visit_string<E: Error>(self, key: String) -> Result<Key<'de>, E> {
        Ok(Key::Owned(key))
    }
}

#[cfg(test)]
mod tests;

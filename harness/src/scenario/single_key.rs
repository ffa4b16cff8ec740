//! Externally tagged enums written as one-key maps (`- fault: {kill: ...}`) or, for unit
//! variants, as a plain string (`- fault: stop-external-dns`).
//!
//! serde_yaml 0.9 reads externally tagged enums only from YAML tags (`!fault`), so the
//! derived enum impls are fed through this adapter instead. The value is streamed from the
//! original deserializer, so serde_yaml's line, column and field path stay on every error.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::StrDeserializer;
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};
use serde::Deserialize;

/// Deserializes one enum value written as a one-key map or a unit variant's name.
pub fn one<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    deserializer.deserialize_any(SingleKeyVisitor(PhantomData))
}

/// Deserializes a list of enum values, each written as a one-key map.
pub fn vec<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct SeqVisitor<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for SeqVisitor<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of one-key maps")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut items = Vec::new();
            while let Some(item) = seq.next_element_seed(OneSeed(PhantomData))? {
                items.push(item);
            }
            Ok(items)
        }
    }
    deserializer.deserialize_seq(SeqVisitor(PhantomData))
}

struct OneSeed<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for OneSeed<T> {
    type Value = T;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        one(deserializer)
    }
}

struct SingleKeyVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for SingleKeyVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map with exactly one key naming the kind")
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<T, E> {
        T::deserialize(StrDeserializer::<E>::new(value))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let Some(key) = map.next_key::<String>()? else {
            return Err(de::Error::custom(
                "expected one key naming the kind, found an empty map",
            ));
        };
        let value = T::deserialize(KeyedEnum {
            key: &key,
            map: &mut map,
        })?;
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::custom(format!(
                "expected one key, found `{key}` and `{extra}`; write each as its own list item"
            )));
        }
        Ok(value)
    }
}

/// Presents `key: value` of a map as an enum to a derived `Deserialize`.
struct KeyedEnum<'k, 'm, A> {
    key: &'k str,
    map: &'m mut A,
}

impl<'de, A: MapAccess<'de>> Deserializer<'de> for KeyedEnum<'_, '_, A> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, A::Error> {
        Err(de::Error::custom("expected an enum"))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        visitor.visit_enum(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct identifier
        ignored_any
    }
}

impl<'de, A: MapAccess<'de>> EnumAccess<'de> for KeyedEnum<'_, '_, A> {
    type Error = A::Error;
    type Variant = Self;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self), A::Error> {
        let variant = seed.deserialize(StrDeserializer::<A::Error>::new(self.key))?;
        Ok((variant, self))
    }
}

impl<'de, A: MapAccess<'de>> VariantAccess<'de> for KeyedEnum<'_, '_, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.map.next_value::<IgnoredAny>().map(|_| ())
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, A::Error> {
        self.map.next_value_seed(seed)
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(TupleSeed { len, visitor })
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(StructSeed { fields, visitor })
    }
}

struct TupleSeed<V> {
    len: usize,
    visitor: V,
}

impl<'de, V: Visitor<'de>> DeserializeSeed<'de> for TupleSeed<V> {
    type Value = V::Value;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        deserializer.deserialize_tuple(self.len, self.visitor)
    }
}

struct StructSeed<V> {
    fields: &'static [&'static str],
    visitor: V,
}

impl<'de, V: Visitor<'de>> DeserializeSeed<'de> for StructSeed<V> {
    type Value = V::Value;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        deserializer.deserialize_struct("", self.fields, self.visitor)
    }
}

/// Deserializes the value of the map entry whose key `key` was just read, as the enum
/// variant `key` names (the value streamed, as [`one`] does).
pub fn entry<'de, A, T>(key: &str, map: &mut A) -> Result<T, A::Error>
where
    A: MapAccess<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(KeyedEnum { key, map })
}

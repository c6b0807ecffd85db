//! The JSON schemas the LLM must follow, derived from the Rust types of its replies with
//! `schemars`. The reply is then parsed into the same type (serde checks the structure the
//! schema describes) and checked against the domain bounds the schema carries.
//!
//! The form is the strict one OpenAI structured outputs and llama.cpp's `json_schema`
//! accept: every property required (an optional value is nullable, not absent), no
//! additional properties, subschemas inline (no `$ref`), enums as `enum`, and only keywords
//! that constrain (no titles, descriptions or defaults).

use schemars::generate::SchemaSettings;
use schemars::transform::{RecursiveTransform, Transform};
use schemars::{JsonSchema, Schema};
use serde_json::Value;

/// The strict schema of `T`.
pub fn strict_schema<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>();
    RecursiveTransform(strict).transform(&mut schema);
    schema.to_value()
}

/// Sets `keyword` (`maxLength`, `maxItems`) of the subschema at `pointer` (a JSON pointer
/// into the schema), for bounds known only at run time.
pub(crate) fn bound(schema: &mut Value, pointer: &str, keyword: &str, bound: usize) {
    if let Some(Value::Object(subschema)) = schema.pointer_mut(pointer) {
        subschema.insert(keyword.to_owned(), Value::from(bound));
    }
}

fn strict(schema: &mut Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    for keyword in ["title", "description", "default"] {
        object.remove(keyword);
    }
    // Documented unit variants come out as a `oneOf` of constants; one `enum` says the same
    // and is what constrained decoders handle best.
    if let Some(Value::Array(variants)) = object.get("oneOf") {
        let constants: Option<Vec<Value>> = variants
            .iter()
            .map(|variant| variant.get("const").filter(|c| c.is_string()).cloned())
            .collect();
        if let Some(constants) = constants {
            object.remove("oneOf");
            object.insert("type".to_owned(), Value::from("string"));
            object.insert("enum".to_owned(), Value::Array(constants));
        }
    }
    if let Some(Value::Object(properties)) = object.get("properties") {
        let every: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
        object.insert("required".to_owned(), Value::Array(every));
        object.insert("additionalProperties".to_owned(), Value::Bool(false));
    }
}

/// `schema` with every `required` list sorted: strict schemas list every property, so the
/// order carries nothing, and comparisons must not depend on it.
#[cfg(test)]
pub(crate) fn normalized(mut schema: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                if let Some(Value::Array(required)) = map.get_mut("required") {
                    required.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                }
                map.values_mut().for_each(walk);
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut schema);
    schema
}

//! The capture's Avro schema compiled once into a tree of `Node`s, for the native writer
//! (`avro.rs`) and reader (`avro_decode.rs`).
//!
//! The schema is the one fastavro parsed (`parse_schema` form), handed over by `producers/avro.py`;
//! any construct the reference's compiled writer refuses is refused here too (ValueError naming the
//! construct and which native piece refused it), so Python keeps the codec for that schema.
use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

/// A primitive type, or what a union branch is: the writer chooses a branch by the reference's
/// `_ACCEPTS` predicate of its kind, in branch order; the reader takes the branch by index.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    Null,
    Boolean,
    Int,
    Long,
    Double,
    String,
    Bytes,
    Array,
    Record,
}

pub(crate) enum Node {
    Primitive(Kind),
    Array(Box<Node>),
    Record(usize),
    Union(Vec<(Kind, Node)>),
}

/// How a field's value is converted between its JSON form and Avro.
pub(crate) enum Convert {
    None,
    /// held as JSON text in a string (or nullable string)
    JsonText,
    /// the reference's own Python function
    Call(Py<PyAny>),
}

pub(crate) struct Field {
    pub(crate) name: Py<PyString>,
    pub(crate) bytes: Vec<u8>,
    pub(crate) default: Option<Py<PyAny>>,
    pub(crate) convert: Convert,
    pub(crate) node: Node,
}

pub(crate) struct Record {
    pub(crate) fields: Vec<Field>,
}

pub(crate) struct Schema {
    pub(crate) records: Vec<Record>,
    pub(crate) root: usize,
}

impl Schema {
    /// `schema` compiled; `json_fields`: the `(record, field)` pairs held as JSON text;
    /// `converters`: other `(record, field)` conversions as Python functions; `role` names the
    /// native piece in a refusal ("writer", "reader").
    pub(crate) fn compile(
        schema: &Bound<'_, PyDict>,
        json_fields: &[(String, String)],
        converters: &Bound<'_, PyDict>,
        role: &'static str,
    ) -> PyResult<Self> {
        let mut compiler = Compiler {
            records: Vec::new(),
            by_name: HashMap::new(),
            json_fields,
            converters,
            role,
        };
        let root = match compiler.node(schema.as_any())? {
            Node::Record(index) => index,
            _ => return Err(compiler.unsupported("a top-level schema that is not a record".into())),
        };
        let records = std::mem::take(&mut compiler.records)
            .into_iter()
            .map(|record| record.ok_or_else(|| compiler.unsupported("an unfinished record".into())))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Self { records, root })
    }
}

struct Compiler<'a, 'py> {
    records: Vec<Option<Record>>,
    by_name: HashMap<String, usize>,
    json_fields: &'a [(String, String)],
    converters: &'a Bound<'py, PyDict>,
    role: &'static str,
}

impl<'py> Compiler<'_, 'py> {
    fn unsupported(&self, what: String) -> PyErr {
        PyValueError::new_err(format!(
            "the native Avro {} does not handle {what}",
            self.role
        ))
    }

    fn node(&mut self, schema: &Bound<'py, PyAny>) -> PyResult<Node> {
        if let Ok(list) = schema.cast::<PyList>() {
            return self.union(list);
        }
        if let Ok(dict) = schema.cast::<PyDict>() {
            if dict.contains("logicalType")? {
                return Err(self.unsupported("logical types".into()));
            }
            let inner = dict
                .get_item("type")?
                .ok_or_else(|| self.unsupported("a schema without a type".into()))?;
            if inner.is_instance_of::<PyDict>() || inner.is_instance_of::<PyList>() {
                return self.node(&inner);
            }
            let kind: String = inner.extract()?;
            return match kind.as_str() {
                "record" => self.record(dict).map(Node::Record),
                "array" => {
                    let items = dict
                        .get_item("items")?
                        .ok_or_else(|| self.unsupported("an array without items".into()))?;
                    Ok(Node::Array(Box::new(self.node(&items)?)))
                }
                other => self.primitive(other).map(Node::Primitive),
            };
        }
        let name: String = schema.extract()?;
        if let Some(&index) = self.by_name.get(&name) {
            return Ok(Node::Record(index));
        }
        self.primitive(&name).map(Node::Primitive)
    }

    fn union(&mut self, branches: &Bound<'py, PyList>) -> PyResult<Node> {
        let mut out = Vec::new();
        for branch in branches.iter() {
            let node = self.node(&branch)?;
            let kind = match &node {
                Node::Primitive(kind) => *kind,
                Node::Array(_) => Kind::Array,
                Node::Record(_) => Kind::Record,
                Node::Union(_) => return Err(self.unsupported("a union inside a union".into())),
            };
            if matches!(kind, Kind::Array | Kind::Record) && out.iter().any(|(k, _)| *k == kind) {
                return Err(
                    self.unsupported("a union with several record or array branches".into())
                );
            }
            out.push((kind, node));
        }
        Ok(Node::Union(out))
    }

    fn record(&mut self, schema: &Bound<'py, PyDict>) -> PyResult<usize> {
        let name: String = schema
            .get_item("name")?
            .ok_or_else(|| self.unsupported("a record without a name".into()))?
            .extract()?;
        if let Some(&index) = self.by_name.get(&name) {
            return Ok(index);
        }
        let index = self.records.len();
        self.records.push(None); // registered first: recursive records terminate
        self.by_name.insert(name.clone(), index);
        let short = name.rsplit('.').next().unwrap_or(&name).to_owned();
        let py = schema.py();
        let mut fields = Vec::new();
        let listed = schema
            .get_item("fields")?
            .ok_or_else(|| self.unsupported("a record without fields".into()))?;
        for field in listed.cast::<PyList>()?.iter() {
            let field = field.cast::<PyDict>()?;
            let field_name: String = field
                .get_item("name")?
                .ok_or_else(|| self.unsupported("a field without a name".into()))?
                .extract()?;
            let kind = field
                .get_item("type")?
                .ok_or_else(|| self.unsupported("a field without a type".into()))?;
            let key = (short.clone(), field_name.clone());
            let node = self.node(&kind)?;
            let convert = if self.json_fields.contains(&key) {
                if !holds_text(&node) {
                    return Err(self.unsupported(format!("JSON text in {}.{}", key.0, key.1)));
                }
                Convert::JsonText
            } else if let Some(function) = self.converters.get_item(key.clone())? {
                Convert::Call(function.unbind())
            } else {
                Convert::None
            };
            fields.push(Field {
                name: PyString::intern(py, &field_name).unbind(),
                bytes: field_name.into_bytes(),
                default: field.get_item("default")?.map(Bound::unbind),
                convert,
                node,
            });
        }
        self.records[index] = Some(Record { fields });
        Ok(index)
    }

    fn primitive(&self, name: &str) -> PyResult<Kind> {
        Ok(match name {
            "null" => Kind::Null,
            "boolean" => Kind::Boolean,
            "int" => Kind::Int,
            "long" => Kind::Long,
            "double" => Kind::Double,
            "string" => Kind::String,
            "bytes" => Kind::Bytes,
            other => return Err(self.unsupported(format!("type {other}"))),
        })
    }
}

/// A string, or a union of null and string: where JSON text can be held.
fn holds_text(node: &Node) -> bool {
    match node {
        Node::Primitive(Kind::String) => true,
        Node::Union(branches) => branches
            .iter()
            .all(|(kind, _)| matches!(kind, Kind::Null | Kind::String)),
        _ => false,
    }
}

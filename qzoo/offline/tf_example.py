"""tf.train.Example parsed without TensorFlow (and its SequenceExample defined beside it).

The messages are TensorFlow's feature.proto and example.proto (package `tensorflow`,
field numbers as there), built at run time with the protobuf package into a pool of
their own, so that nothing is generated and nothing clashes with TensorFlow's own
classes when both are loaded:

  BytesList { repeated bytes value = 1; }        Feature { oneof kind {
  FloatList { repeated float value = 1; }          BytesList bytes_list = 1;
  Int64List { repeated int64 value = 1; }          FloatList float_list = 2;
  Features { map<string, Feature> feature = 1; }   Int64List int64_list = 3; } }
  FeatureList { repeated Feature feature = 1; }
  FeatureLists { map<string, FeatureList> feature_list = 1; }
  Example { Features features = 1; }
  SequenceExample { Features context = 1; FeatureLists feature_lists = 2; }
"""

import functools

import numpy as np

_F = None  # descriptor_pb2.FieldDescriptorProto, set on first use


def _field(message, name, number, kind, label="optional", type_name=None, oneof=None):
    field = message.field.add(name=name, number=number, type=getattr(_F, f"TYPE_{kind}"),
                              label=getattr(_F, f"LABEL_{label.upper()}"))  # fmt: skip
    if type_name:
        field.type_name = f".tensorflow.{type_name}"
    if oneof is not None:
        field.oneof_index = oneof


def _map(message, name, value_type):
    """A proto3 `map<string, value_type> name = 1`: a repeated nested entry message."""
    entry_name = "".join(part.title() for part in name.split("_")) + "Entry"
    entry = message.nested_type.add(name=entry_name)
    entry.options.map_entry = True
    _field(entry, "key", 1, "STRING")
    _field(entry, "value", 2, "MESSAGE", type_name=value_type)
    _field(message, name, 1, "MESSAGE", "repeated", f"{message.name}.{entry_name}")


@functools.cache
def messages():
    """{name: message class} of the eight messages above."""
    global _F
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    _F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="qzoo/tensorflow_example.proto", package="tensorflow", syntax="proto3"
    )
    for name, kind in (("BytesList", "BYTES"), ("FloatList", "FLOAT"), ("Int64List", "INT64")):
        _field(proto.message_type.add(name=name), "value", 1, kind, "repeated")
    feature = proto.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for number, name in enumerate(("bytes_list", "float_list", "int64_list"), 1):
        type_name = "".join(part.title() for part in name.split("_"))
        _field(feature, name, number, "MESSAGE", type_name=type_name, oneof=0)
    _map(proto.message_type.add(name="Features"), "feature", "Feature")
    _field(proto.message_type.add(name="FeatureList"), "feature", 1, "MESSAGE", "repeated",
           "Feature")  # fmt: skip
    _map(proto.message_type.add(name="FeatureLists"), "feature_list", "FeatureList")
    _field(proto.message_type.add(name="Example"), "features", 1, "MESSAGE", type_name="Features")
    sequence = proto.message_type.add(name="SequenceExample")
    _field(sequence, "context", 1, "MESSAGE", type_name="Features")
    _field(sequence, "feature_lists", 2, "MESSAGE", type_name="FeatureLists")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        m.name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tensorflow.{m.name}"))
        for m in proto.message_type
    }


def feature_values(feature):
    """A Feature's values: a list of bytes, or a float32 / int64 array (None if unset)."""
    kind = feature.WhichOneof("kind")
    if kind == "bytes_list":
        return list(feature.bytes_list.value)
    if kind == "float_list":
        return np.array(feature.float_list.value, np.float32)
    if kind == "int64_list":
        return np.array(feature.int64_list.value, np.int64)
    return None


def parse_example(data: bytes) -> dict:
    """{name: values} of a serialized tf.train.Example (DecodeError if it is not one)."""
    example = messages()["Example"]()
    example.ParseFromString(data)
    return {name: feature_values(f) for name, f in example.features.feature.items()}

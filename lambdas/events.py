"""The events of the functions fed by queues (route, trigger, catalog): SQS batches whose
messages carry EventBridge's S3 "Object Created" events, as a rule sends them to a queue.

The batch is Lambda's own, so :class:`Messages` is checked whole (with ``lambda_handler``: a
record without its ``messageId`` or ``body`` is no SQS record, an ``InvalidEventError``). A body
is whatever was sent to the queue (by the rule, a redrive, or anyone allowed to send to it), so
each is read on its own (:func:`object_created`): one that is not JSON, or an "Object Created"
event without a bucket and a key, is an ``InvalidEventError`` for that message alone, and each
function says what a malformed message means to it; any other event (``s3:TestEvent``) is no
object created, and is ignored.

Only the fields castable reads are checked. Powertools' parser models (``SqsRecordModel``,
``S3EventNotificationEventBridgeModel``) require every field of both envelopes (the message's
attributes, the event's id, account, time, region, resources, request id and requester), none
of which castable reads: with them a message that lacks one would be malformed for nothing.

A key is taken as the event gives it, not URL-decoded: these functions read the keys of objects
castable names itself under a table (manifests, tombstones), and of landing prefixes, which hold
no character a URL encoding changes. The ingest function, which reads landed files' names, reads
its events with Powertools' ``S3EventBridgeNotificationEvent``, which decodes them (whether
EventBridge encodes a key as S3's own notifications do, ``red+flower.jpg`` for ``red flower.jpg``,
could not be checked here: moto sends it raw).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lambdas.runtime import InvalidEventError, parse

OBJECT_CREATED = "Object Created"


class Bucket(BaseModel):
    name: str = Field(min_length=1)


class CreatedObject(BaseModel):
    key: str = Field(min_length=1)


class ObjectCreatedDetail(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    bucket: Bucket
    object_: CreatedObject = Field(alias="object")


class ObjectCreated(BaseModel):
    """EventBridge's S3 "Object Created" event: which object of which bucket was created."""

    model_config = ConfigDict(populate_by_name=True)
    detail_type: Literal["Object Created"] = Field(alias="detail-type")
    detail: ObjectCreatedDetail

    @property
    def bucket(self) -> str:
        return self.detail.bucket.name

    @property
    def key(self) -> str:
        """The object's key, as the event gives it."""
        return self.detail.object_.key


def object_created(body: str) -> ObjectCreated | None:
    """The "Object Created" event an SQS message's ``body`` carries; ``None`` for any other
    event; ``InvalidEventError`` for a body that is not JSON, or not an event EventBridge sends."""
    try:
        event: Any = json.loads(body)
    except ValueError as e:
        raise InvalidEventError(f"the message's body is not JSON: {e}") from None
    if not isinstance(event, dict):
        raise InvalidEventError(f"the message's body is JSON {type(event).__name__}, not an EventBridge event")
    if event.get("detail-type") != OBJECT_CREATED:
        return None
    return parse(ObjectCreated, event)


class Message(BaseModel):
    """An SQS message of a batch: its id and its body, read at once by :func:`object_created`."""

    model_config = ConfigDict(populate_by_name=True)
    message_id: str = Field(alias="messageId", min_length=1)
    body: str


class Messages(BaseModel):
    """A batch of SQS messages, as Lambda's event source mapping hands it to a function."""

    records: list[Message] = Field(alias="Records")


@dataclass(frozen=True)
class Created:
    """An object a message of the batch says was created."""

    message_id: str
    bucket: str
    key: str


@dataclass(frozen=True)
class Malformed:
    """A message of the batch whose body is no S3 event as EventBridge sends it, and why."""

    message_id: str
    problem: str


def read(batch: Messages) -> Iterator[Created | Malformed]:
    """Each object the batch's messages say was created, and each malformed message, in the
    batch's order; messages of any other event are left out."""
    for message in batch.records:
        try:
            found = object_created(message.body)
        except InvalidEventError as e:
            yield Malformed(message.message_id, str(e))
            continue
        if found is not None:
            yield Created(message.message_id, found.bucket, found.key)

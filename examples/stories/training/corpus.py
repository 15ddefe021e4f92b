"""The story model's training corpus: short journey tales generated from a grammar.

A story (one of many thousands, all of this shape):

  opening   a hero (a name, an animal, a pronoun) and where it lives and what it likes
  quest     one morning the hero sets off for a place, with a reason
  1-2 x     on the way it meets a companion; the same exchange every time ("Where are you
            going, NAME?" ... "May I come with you?" ... "Yes, you may"), the group named in
            full ("So Mia, Ben and Rosa walked on together"), and the story's refrain sung
  arrival   a problem at the place, solved by one of the companions
  ending    the quest's ending, the walk home with the refrain once more, "The end."

Names, animals, places and refrains are repeated within a story on purpose: a tiny model
learns to carry them forward, and the text has the repetition that prompt lookup drafts from
(speculative decoding). The grammar draws from one random.Random, so generate(seed, n) gives
the same stories for the same arguments.
"""
import random

HEROES = [
    ("Mia", "fox", "she"), ("Tom", "bear", "he"), ("Pip", "mouse", "he"), ("Lily", "rabbit", "she"),
    ("Ben", "duck", "he"), ("Rosa", "hen", "she"), ("Sam", "owl", "he"), ("Nora", "cat", "she"),
    ("Max", "dog", "he"), ("Ada", "goat", "she"), ("Leo", "frog", "he"), ("Ella", "squirrel", "she"),
    ("Finn", "hedgehog", "he"), ("Ruby", "lamb", "she"), ("Otto", "badger", "he"), ("Ivy", "robin", "she"),
    ("Hugo", "pig", "he"), ("Luna", "cow", "she"), ("Jack", "horse", "he"), ("Anna", "mole", "she"),
    ("Oscar", "crow", "he"), ("Daisy", "deer", "she"), ("Toby", "beaver", "he"), ("Molly", "sheep", "she"),
]
ADJECTIVES = ["little", "small", "brave", "kind", "shy", "curious", "happy", "clever", "sleepy",
              "cheerful", "gentle", "busy"]
HOMES = [
    "in a small house by the river", "in a hole under an old oak tree",
    "in a warm nest at the top of the hill", "in a red barn at the edge of the village",
    "in a little house in the forest", "on a farm near the lake", "in a cosy den under the hill",
    "in a blue house next to the mill", "in a garden full of flowers", "by a pond in the meadow",
]
LIKES = [
    "to sing songs", "to look at the stars", "to bake bread", "to pick flowers",
    "to play by the water", "to count the clouds", "to read old books", "to dance in the rain",
    "to paint pictures", "to tell long stories", "to watch the birds", "to grow carrots",
]
OPENINGS = [
    "Once upon a time there was a {adj} {kind} called {name}.",
    "There once was a {adj} {kind} named {name}.",
    "Long ago there lived a {adj} {kind} called {name}.",
    "Once there was a {adj} {kind}, and {her} name was {name}.",
]
DEPARTURES = [
    "One morning {name} woke up early and said, \"Today I will go to {dest} {goal}.\"",
    "One sunny day {name} said, \"I will go to {dest} {goal}.\"",
    "One day {name} packed a small bag and said, \"I am going to {dest} {goal}.\"",
]
SET_OFF = ["So {she} set off down the road.", "And off {she} went.",
           "So {she} closed the door and set off.", "So {she} walked out into the morning sun."]
PLACES_MET = ["On the way", "By the old well", "Near the big rock", "At the wooden gate",
              "Under the apple tree", "Beside the little pond", "On the bridge", "At the end of the lane",
              "In the tall grass", "By the stone wall"]
MEETINGS = ["{place}, {name} met a {kind} called {other}.", "{place}, {name} saw a {kind} called {other}.",
            "{place}, {name} met {other} the {kind}."]
ASKS = ["\"Where are you going, {name}?\" asked {other}.",
        "\"Hello, {name}! Where are you going?\" asked {other}."]
ANSWERS = ["\"I am going to {dest} {goal},\" said {name}."]
COME = ["\"May I come with you?\" asked {other}.", "\"Can I come too?\" asked {other}."]
YES = ["\"Yes, you may,\" said {name}.", "\"Yes, of course,\" said {name}.",
       "\"Yes, come along,\" said {name}."]
WALK_ON = ["So {group} walked on together, and they sang:",
           "So {group} went on together, and they sang their song:"]
REFRAINS = [
    "Step by step and side by side, the road is long and the world is wide!",
    "Over the hill and under the sky, we will get there, you and I!",
    "One foot, two feet, on we go, fast or slow, fast or slow!",
    "Sing a song and walk along, the day is bright and we are strong!",
    "Left and right and left again, through the sun and through the rain!",
    "Tip tap, tip tap, down the lane, we will soon be home again!",
    "Hop and skip and jump and run, friends together having fun!",
    "Up the path and round the tree, come along and walk with me!",
]
# A quest: where, why, what goes wrong there (with {other}: the companion who solves it), and
# how it ends.
QUESTS = [
    dict(dest="the old mill", goal="to get some flour for a cake",
         problem="the door of the mill was shut, and the miller was fast asleep",
         solution="{other} knocked on the door three times and called out, \"Hello, miller!\" The miller "
                  "woke up, rubbed his eyes and gave them a big bag of flour.",
         ending="{name} baked a big round cake, and everyone had a piece."),
    dict(dest="the top of the hill", goal="to see the moon",
         problem="a big grey cloud was in front of the moon",
         solution="\"Let us wait and sing our song,\" said {other}. So they sang, and the wind came and "
                  "blew the cloud away. The moon was round and bright.",
         ending="They lay in the soft grass and looked at the moon until they were sleepy."),
    dict(dest="the deep forest", goal="to find the sweet berries",
         problem="it was dark under the trees, and they could not see the path",
         solution="Then {other} saw a little light. It was a firefly! The firefly showed them the way to "
                  "the berries.",
         ending="They ate berries until their faces were red and purple."),
    dict(dest="the other side of the river", goal="to visit grandmother",
         problem="the bridge was broken, and the water was deep and fast",
         solution="{other} found a long log, and they all pushed it across the water. Then they walked "
                  "over the log, one by one.",
         ending="Grandmother was so happy to see them, and she made hot soup for everyone."),
    dict(dest="the big lake", goal="to find a blue stone",
         problem="the blue stone lay at the bottom of the water",
         solution="{other} took a deep breath, went down into the water and came back up with the blue "
                  "stone.",
         ending="{name} put the blue stone by the window, where it shone like the sky."),
    dict(dest="the tall tree", goal="to get back a lost kite",
         problem="the kite was stuck high up in the branches",
         solution="{other} climbed up the tree, branch by branch, and set the kite free. It floated down "
                  "into {name}'s arms.",
         ending="They flew the kite in the wind until the sun went down."),
    dict(dest="the village market", goal="to buy a red hat",
         problem="the market was very busy, and {name} could not find the hat stall",
         solution="{other} asked the baker, and the baker pointed to a little stall in the corner. There "
                  "was the red hat!",
         ending="{name} wore the red hat all the way home, and everyone said it looked very fine."),
    dict(dest="the big garden", goal="to find seeds for the spring",
         problem="the gate of the garden was locked",
         solution="{other} looked under a flower pot and found the key. The gate opened with a long "
                  "creak.",
         ending="{name} planted the seeds, and in the spring the garden was full of flowers."),
    dict(dest="the sea", goal="to find a pretty shell",
         problem="the waves were big, and all the shells were far out on the sand",
         solution="{other} waited for the waves to go back and ran out to get the prettiest shell of "
                  "all.",
         ending="{name} held the shell to {her} ear and listened to the sound of the sea."),
    dict(dest="the old castle", goal="to hear the bells ring",
         problem="the bells were quiet, because the rope was tangled",
         solution="{other} climbed the steps and pulled the rope loose. Ding, dong, ding, dong, the bells "
                  "rang out over the hills.",
         ending="They stood and listened to the bells until the very last ding."),
]
SAD = ["{name} was sad.", "\"Oh no!\" said {name}.", "{name} sat down and sighed.",
       "\"What can we do?\" asked {name}."]
IDEA = ["Then {other} had an idea.", "\"I can help,\" said {other}.", "\"Do not worry,\" said {other}."]
THANKS = ["\"Thank you, {other},\" said {name}.", "\"Thank you, {other}! You are a good friend,\" said {name}."]
HOME = ["Then they all walked home together, and they sang their song one more time:",
        "On the way home they sang their song again:"]
CLOSING = ["That night {name} went to sleep with a big smile. The end.",
           "And {name} and {her} friends were happy for a long, long time. The end.",
           "It was the best day {name} ever had. The end."]


def group_name(names):
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def story(rng):
    """One story as text (paragraphs separated by blank lines)."""
    cast = rng.sample(HEROES, 4)
    name, kind, she = cast[0]
    words = dict(name=name, kind=kind, she=she, her="her" if she == "she" else "his", adj=rng.choice(ADJECTIVES))
    quest = rng.choice(QUESTS)
    words.update(dest=quest["dest"], goal=quest["goal"])
    refrain = "\"" + rng.choice(REFRAINS) + "\""

    def f(template, **more):
        return template.format(**dict(words, **more))

    def cap(s):
        return s[0].upper() + s[1:]

    paras = [" ".join([f(rng.choice(OPENINGS)), f("{name} lived {home}.", home=rng.choice(HOMES)),
                       f("Every day {name} liked {like}.", like=rng.choice(LIKES))]),
             " ".join([f(rng.choice(DEPARTURES)), f(rng.choice(SET_OFF))])]
    walkers = [name]
    places = rng.sample(PLACES_MET, 3)
    for (other, okind, _), place in zip(cast[1:1 + rng.choice((1, 2))], places):
        walkers.append(other)
        paras.append(" ".join([f(rng.choice(MEETINGS), place=place, kind=okind, other=other),
                               f(rng.choice(ASKS), other=other), f(rng.choice(ANSWERS)),
                               f(rng.choice(COME), other=other), f(rng.choice(YES))]))
        paras.append(f(rng.choice(WALK_ON), group=group_name(walkers)) + " " + refrain)
    helper = rng.choice(walkers[1:])
    paras.append(" ".join(["At last they came to %s. But %s." % (quest["dest"], f(quest["problem"])),
                           f(rng.choice(SAD)), f(rng.choice(IDEA), other=helper),
                           f(quest["solution"], other=helper), f(rng.choice(THANKS), other=helper)]))
    paras.append(cap(f(quest["ending"])) + " " + rng.choice(HOME) + " " + refrain)
    paras.append(f(rng.choice(CLOSING)))
    return "\n\n".join(paras)


def generate(seed, n):
    """n stories from the grammar, deterministic in (seed, n)."""
    rng = random.Random(seed)
    return [story(rng) for _ in range(n)]


if __name__ == "__main__":
    import sys
    for s in generate(int(sys.argv[1]) if len(sys.argv) > 1 else 1, 2):
        print(s + "\n\n----\n")

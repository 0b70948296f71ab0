#define BOOST_TEST_MODULE ddp
#include <boost/test/unit_test.hpp>
